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
