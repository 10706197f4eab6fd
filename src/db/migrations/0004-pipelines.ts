import { Migration } from '@mikro-orm/migrations';

export class Migration0004Pipelines extends Migration {
  override name = '0004-pipelines';

  override up(): void {
    this.addSql(`
      create table agents (
        id serial primary key,
        name varchar(255) not null,
        token_hash char(64) not null,
        created_at timestamptz not null default now(),
        last_seen_at timestamptz
      )`);
    this.addSql(`create unique index agents_token_hash_key on agents (token_hash)`);
    this.addSql(`
      create table agent_instances (
        agent_id integer not null references agents(id) on delete cascade,
        instance varchar(255) not null,
        last_seen_at timestamptz not null default now(),
        primary key (agent_id, instance)
      )`);
    this.addSql(`
      create table pipelines (
        id serial primary key,
        repo_id integer not null references repos(id) on delete cascade,
        number integer not null,
        commit_node varchar(128) not null,
        branch varchar(255) not null default '',
        tag varchar(255) not null default '',
        event varchar(32) not null,
        events text[] not null,
        status varchar(16) not null
          check (status in ('pending', 'running', 'success', 'failure', 'cancelled', 'error')),
        trigger_by integer references users(id) on delete set null,
        error_message text,
        agent_id integer references agents(id) on delete set null,
        agent_instance varchar(255),
        agent_done boolean not null default false,
        created_at timestamptz not null default now(),
        started_at timestamptz,
        finished_at timestamptz,
        unique (repo_id, number)
      )`);
    this.addSql(`create index pipelines_pending_idx on pipelines (id) where status = 'pending'`);
    this.addSql(
      `create index pipelines_running_idx on pipelines (agent_id, agent_instance) where status = 'running'`,
    );
    this.addSql(`create index pipelines_repo_status_idx on pipelines (repo_id, status, number desc)`);
    this.addSql(`create index pipelines_repo_commit_idx on pipelines (repo_id, commit_node)`);
    this.addSql(`
      create table pipeline_steps (
        id serial primary key,
        pipeline_id integer not null references pipelines(id) on delete cascade,
        number integer not null,
        name varchar(255) not null,
        image varchar(1024) not null,
        commands text[] not null,
        environment jsonb not null default '{}',
        status varchar(16) not null
          check (status in ('pending', 'running', 'success', 'failure', 'skipped', 'cancelled')),
        exit_code integer,
        started_at timestamptz,
        finished_at timestamptz,
        log_size bigint not null default 0,
        unique (pipeline_id, number)
      )`);
    this.addSql(`
      create table step_log_chunks (
        step_id integer not null references pipeline_steps(id) on delete cascade,
        "offset" bigint not null,
        size integer not null,
        blob_key varchar(255) not null,
        primary key (step_id, "offset")
      )`);
    this.addSql(
      `alter table api_tokens add column pipeline_id integer references pipelines(id) on delete cascade`,
    );
  }
}
