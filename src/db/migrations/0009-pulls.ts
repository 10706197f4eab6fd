import { Migration } from '@mikro-orm/migrations';

/**
 * Pull requests and their comments.
 *
 * - `number` comes from the shared per-repository allocator (`db/numbers.ts`, kind `pulls`).
 * - At most one open pull request per (repository, source, target): a partial unique index, so
 *   two concurrent creates cannot both succeed.
 * - `head_commit`, `base_commit`, `mergeable_state`, `conflicted_files`, `commits_ahead` and
 *   `commits_behind` are the last known mergeability (at create, on a source push, at close and
 *   at merge); reads of a pull request whose refs exist answer live values instead.
 * - Lists are by status, newest first: `(repo_id, status, number desc)`.
 */
export class Migration0009Pulls extends Migration {
  override name = '0009-pulls';

  override up(): void {
    this.addSql(`
      create table pulls (
        id serial primary key,
        repo_id integer not null references repos(id) on delete cascade,
        number integer not null,
        title text not null,
        body text not null default '',
        status varchar(8) not null check (status in ('open', 'closed', 'merged')),
        source_ref text not null,
        target_ref text not null,
        author_id integer references users(id) on delete set null,
        head_commit text not null,
        base_commit text not null,
        mergeable_state varchar(8) not null
          check (mergeable_state in ('clean', 'conflict', 'behind', 'empty', 'checking')),
        conflicted_files text[] not null default '{}',
        commits_ahead integer not null default 0,
        commits_behind integer not null default 0,
        merged_by integer references users(id) on delete set null,
        merged_at timestamptz,
        merge_commit text,
        comment_count integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        closed_at timestamptz,
        unique (repo_id, number)
      )`);
    this.addSql(
      `create unique index pulls_open_refs_key on pulls (repo_id, source_ref, target_ref) where status = 'open'`,
    );
    this.addSql(`create index pulls_status_idx on pulls (repo_id, status, number desc)`);
    this.addSql(`create index pulls_author_id_idx on pulls (author_id)`);
    this.addSql(`create index pulls_merged_by_idx on pulls (merged_by)`);
    this.addSql(`
      create table pull_comments (
        id serial primary key,
        pull_id integer not null references pulls(id) on delete cascade,
        author_id integer references users(id) on delete set null,
        body text not null,
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create index pull_comments_pull_idx on pull_comments (pull_id, id)`);
  }
}
