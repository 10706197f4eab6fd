import { Migration } from '@mikro-orm/migrations';

/**
 * Full-text search of issues and pull requests, and the indexes of repository search.
 *
 * Issues and pull requests get two generated tsvector columns (the text search configuration
 * `english`: words by their stem, stop words left out), computed by PostgreSQL on every insert
 * and update of the title or body:
 * - `search`: the title (weight A) followed by the body (weight B), what a search matches;
 * - `search_title`: the title alone, which decides the title matches that rank first.
 * Each has a GIN index led by `repo_id` (with the `btree_gin` extension; without it, a GIN on the
 * vector alone, and the repository is then checked on the rows found). Adding the columns
 * rewrites both tables once.
 *
 * A search counts its matches once per page, and a common word matches thousands of rows, so
 * the counts are kept (in each server process) with the repository's text version they were
 * counted at: `search_versions` holds one number per repository, raised by triggers in the
 * transaction of every insert and delete of issues and pull requests and of every change of a
 * title or body; a kept count of another version is counted again.
 *
 * Repositories are searched by name (a substring: a trigram GIN on `lower(name)`, when `pg_trgm`
 * can be installed) and by the words of their description (a GIN on its tsvector).
 */
export class Migration0013Search extends Migration {
  override name = '0013-search';

  override up(): void {
    for (const table of ['issues', 'pulls']) {
      this.addSql(`
        alter table ${table}
          add column search_title tsvector generated always as (to_tsvector('english', title)) stored,
          add column search tsvector generated always as
            (setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', body), 'B')) stored`);
      this.addSql(`
        do $$
        begin
          create extension if not exists btree_gin;
          execute 'create index ${table}_search_idx on ${table} using gin (repo_id, search)';
          execute 'create index ${table}_search_title_idx on ${table} using gin (repo_id, search_title)';
        exception when others then
          raise notice 'btree_gin unavailable (%): ${table} search indexes without repo_id', sqlerrm;
          execute 'create index ${table}_search_idx on ${table} using gin (search)';
          execute 'create index ${table}_search_title_idx on ${table} using gin (search_title)';
        end
        $$`);
    }
    this.addSql(`
      create table search_versions (
        repo_id integer primary key references repos (id) on delete cascade,
        version bigint not null default 0
      )`);
    // The rows of a statement (inserted or deleted), one raise per repository; a repository being
    // deleted (its rows go by cascade) is left out.
    this.addSql(`
      create function search_versions_raise() returns trigger language plpgsql as $$
      begin
        insert into search_versions as v (repo_id, version)
          select distinct c.repo_id, 1 from changed c where exists (select 1 from repos r where r.id = c.repo_id)
          on conflict (repo_id) do update set version = v.version + 1;
        return null;
      end $$`);
    this.addSql(`
      create function search_versions_raise_row() returns trigger language plpgsql as $$
      begin
        insert into search_versions as v (repo_id, version) values (new.repo_id, 1)
          on conflict (repo_id) do update set version = v.version + 1;
        return null;
      end $$`);
    for (const table of ['issues', 'pulls']) {
      this.addSql(`create trigger ${table}_search_inserted after insert on ${table}
        referencing new table as changed for each statement execute function search_versions_raise()`);
      this.addSql(`create trigger ${table}_search_deleted after delete on ${table}
        referencing old table as changed for each statement execute function search_versions_raise()`);
      this.addSql(`create trigger ${table}_search_edited after update of title, body on ${table} for each row
        when (old.title is distinct from new.title or old.body is distinct from new.body)
        execute function search_versions_raise_row()`);
    }
    this.addSql(
      `create index repos_description_search_idx on repos using gin (to_tsvector('english', description))`,
    );
    this.addSql(`
      do $$
      begin
        create extension if not exists pg_trgm;
        execute 'create index repos_name_trgm_idx on repos using gin (lower(name) gin_trgm_ops)';
      exception when others then
        raise notice 'pg_trgm unavailable (%): repository name search scans the table', sqlerrm;
      end
      $$`);
  }
}
