import { Migration } from '@mikro-orm/migrations';

export class Migration0003Issues extends Migration {
  override name = '0003-issues';

  override up(): void {
    this.addSql(`
      create table labels (
        id serial primary key,
        scope varchar(8) not null check (scope in ('admin', 'org', 'repo')),
        org_id integer references orgs(id) on delete cascade,
        repo_id integer references repos(id) on delete cascade,
        name varchar(100) not null,
        color varchar(7) not null,
        description text not null default '',
        created_at timestamptz not null default now(),
        check ((scope = 'admin' and org_id is null and repo_id is null)
            or (scope = 'org' and org_id is not null and repo_id is null)
            or (scope = 'repo' and repo_id is not null))
      )`);
    this.addSql(
      `create unique index labels_scope_name_key on labels (scope, coalesce(org_id, 0), coalesce(repo_id, 0), lower(name))`,
    );
    this.addSql(`
      create table repo_counters (
        repo_id integer primary key references repos(id) on delete cascade,
        last_issue_number integer not null default 0
      )`);
    this.addSql(`
      create table issues (
        id serial primary key,
        repo_id integer not null references repos(id) on delete cascade,
        number integer not null,
        title varchar(500) not null,
        body text not null default '',
        state varchar(8) not null check (state in ('new', 'open', 'closed')),
        severity varchar(8) not null default 'none'
          check (severity in ('none', 'low', 'medium', 'high', 'critical')),
        author_id integer references users(id) on delete set null,
        comment_count integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        closed_at timestamptz,
        unique (repo_id, number)
      )`);
    this.addSql(`create index issues_repo_state_number_idx on issues (repo_id, state, number desc)`);
    this.addSql(`create index issues_repo_state_updated_idx on issues (repo_id, state, updated_at desc)`);
    this.addSql(
      `create index issues_repo_state_comments_idx on issues (repo_id, state, comment_count desc, number desc)`,
    );
    this.addSql(`create index issues_repo_severity_idx on issues (repo_id, severity, number desc)`);
    this.addSql(`create index issues_author_idx on issues (author_id, repo_id)`);
    // Title search: a trigram index when pg_trgm may be created; without it `q` still works (scan).
    this.addSql(`
      do $$ begin
        create extension if not exists pg_trgm;
        create index issues_title_trgm_idx on issues using gin (lower(title) gin_trgm_ops);
      exception when others then raise notice 'pg_trgm unavailable, no trigram index: %', sqlerrm;
      end $$`);
    this.addSql(`
      create table issue_labels (
        issue_id integer not null references issues(id) on delete cascade,
        label_id integer not null references labels(id) on delete cascade,
        primary key (issue_id, label_id)
      )`);
    this.addSql(`create index issue_labels_label_idx on issue_labels (label_id, issue_id)`);
    this.addSql(`
      create table issue_assignees (
        issue_id integer not null references issues(id) on delete cascade,
        user_id integer not null references users(id) on delete cascade,
        created_at timestamptz not null default now(),
        primary key (issue_id, user_id)
      )`);
    this.addSql(`create index issue_assignees_user_idx on issue_assignees (user_id, issue_id)`);
    this.addSql(`
      create table issue_comments (
        id serial primary key,
        issue_id integer not null references issues(id) on delete cascade,
        author_id integer references users(id) on delete set null,
        body text not null,
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create index issue_comments_issue_idx on issue_comments (issue_id, id)`);
  }
}
