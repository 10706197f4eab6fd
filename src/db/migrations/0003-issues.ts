import { Migration } from '@mikro-orm/migrations';

/**
 * Issues, their comments, the label catalog and per-repository counters.
 *
 * An issue's labels and assignees are integer arrays on the issue row (`label_ids`,
 * `assignee_ids`, kept in request order), so every list filter is a predicate on one table and
 * PostgreSQL can combine the indexes below (BitmapAnd) for any filter combination.
 *
 * List performance (100,000 issues in one repository, see bench/README.md):
 * - ordered scans for each sort: `number`, `updated_at desc` and `comment_count desc` (ties by
 *   `number desc`), each per state `(repo_id, state, ...)`, for all states `(repo_id, ...)`,
 *   and for `active` (new + open) as partial indexes `where state <> 'closed'`;
 * - `comment_count` is a column maintained in the comment transaction;
 * - filters: `(repo_id, severity, state, number)`, `(repo_id, author_id, state, number)`, GIN on
 *   `label_ids` and `assignee_ids`, and a trigram GIN on `lower(title)` for `q` when the
 *   `pg_trgm` extension can be installed (without it `q` still works by scanning).
 * - per-state counts per repository in `repo_counters`, so unfiltered lists need no count scan.
 */
export class Migration0003Issues extends Migration {
  override name = '0003-issues';

  override up(): void {
    this.addSql(`
      create table repo_counters (
        repo_id integer primary key references repos(id) on delete cascade,
        last_issue_number integer not null default 0,
        issues_new integer not null default 0,
        issues_open integer not null default 0,
        issues_closed integer not null default 0
      )`);
    this.addSql(`
      create table labels (
        id serial primary key,
        scope varchar(8) not null check (scope in ('admin', 'org', 'repo')),
        org_id integer references orgs(id) on delete cascade,
        repo_id integer references repos(id) on delete cascade,
        name varchar(100) not null,
        color char(7) not null,
        description text not null default '',
        created_at timestamptz not null default now(),
        check (
          (scope = 'admin' and org_id is null and repo_id is null)
          or (scope = 'org' and org_id is not null and repo_id is null)
          or (scope = 'repo' and org_id is null and repo_id is not null)
        )
      )`);
    this.addSql(`create unique index labels_admin_name_key on labels (lower(name)) where scope = 'admin'`);
    this.addSql(
      `create unique index labels_org_name_key on labels (org_id, lower(name)) where scope = 'org'`,
    );
    this.addSql(
      `create unique index labels_repo_name_key on labels (repo_id, lower(name)) where scope = 'repo'`,
    );
    this.addSql(`
      create table issues (
        id serial primary key,
        repo_id integer not null references repos(id) on delete cascade,
        number integer not null,
        title text not null,
        body text not null default '',
        state varchar(8) not null check (state in ('new', 'open', 'closed')),
        severity varchar(8) not null default 'none'
          check (severity in ('none', 'low', 'medium', 'high', 'critical')),
        author_id integer references users(id) on delete set null,
        label_ids integer[] not null default '{}',
        assignee_ids integer[] not null default '{}',
        comment_count integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        closed_at timestamptz,
        unique (repo_id, number)
      )`);
    const sorts = {
      number: 'number',
      updated: 'updated_at desc, number desc',
      comments: 'comment_count desc, number desc',
    };
    for (const [name, cols] of Object.entries(sorts)) {
      this.addSql(`create index issues_state_${name}_idx on issues (repo_id, state, ${cols})`);
      this.addSql(
        `create index issues_active_${name}_idx on issues (repo_id, ${cols}) where state <> 'closed'`,
      );
      if (name !== 'number') this.addSql(`create index issues_all_${name}_idx on issues (repo_id, ${cols})`);
    }
    this.addSql(`create index issues_severity_idx on issues (repo_id, severity, state, number)`);
    this.addSql(`create index issues_author_idx on issues (repo_id, author_id, state, number)`);
    this.addSql(`create index issues_author_id_idx on issues (author_id)`);
    this.addSql(`create index issues_label_ids_idx on issues using gin (label_ids)`);
    this.addSql(`create index issues_assignee_ids_idx on issues using gin (assignee_ids)`);
    this.addSql(`
      do $$
      begin
        create extension if not exists pg_trgm;
        execute 'create index issues_title_trgm_idx on issues using gin (lower(title) gin_trgm_ops)';
      exception when others then
        raise notice 'pg_trgm unavailable (%): issue title search scans the repository', sqlerrm;
      end
      $$`);
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
