import { Migration } from '@mikro-orm/migrations';

/**
 * CI agent process identity and bounded steps: which agent process (nonce) claimed a pipeline,
 * the processes seen per agent instance (a restart is told apart from a twin), each step's
 * timeout from the pipeline file, and whether its log was truncated.
 */
export class Migration0005CiIsolation extends Migration {
  override name = '0005-ci-isolation';

  override up(): void {
    this.addSql(`alter table pipelines add column agent_nonce varchar(64)`);
    this.addSql(`
      create table agent_processes (
        agent_id integer not null references agents(id) on delete cascade,
        instance varchar(255) not null,
        nonce varchar(64) not null,
        first_seen_at timestamptz not null default now(),
        last_seen_at timestamptz not null default now(),
        primary key (agent_id, instance, nonce)
      )`);
    this.addSql(`alter table pipeline_steps add column timeout_seconds integer`);
    this.addSql(`alter table pipeline_steps add column log_truncated boolean not null default false`);
  }
}
