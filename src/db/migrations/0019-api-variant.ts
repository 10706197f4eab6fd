import { Migration } from '@mikro-orm/migrations';

/**
 * The earlier API variant (docs/api-variants.md): a token may pin the variant its requests are
 * answered in (`api_variant`, null: the server's default); a webhook keeps the variant of the
 * request that created it (event names of its deliveries). `commit_revs`: for kinds whose VCS
 * numbers no commits itself (Git), each commit's `rev` (the earlier variant's integer revision),
 * its position in the repository's sequence of commits as they arrived (src/repos/commit-revs.ts).
 */
export class Migration0019ApiVariant extends Migration {
  override name = '0019-api-variant';

  override up(): void {
    this.addSql(`
      alter table api_tokens add column api_variant text
        check (api_variant in ('current', 'earlier'))`);
    this.addSql(`
      alter table webhooks add column api_variant text not null default 'current'
        check (api_variant in ('current', 'earlier'))`);
    this.addSql(`
      create table commit_revs (
        repo_id integer not null references repos(id) on delete cascade,
        commit_id text not null,
        rev integer not null check (rev >= 0),
        primary key (repo_id, commit_id),
        unique (repo_id, rev)
      )`);
  }

  override down(): void {
    this.addSql('drop table commit_revs');
    this.addSql('alter table webhooks drop column api_variant');
    this.addSql('alter table api_tokens drop column api_variant');
  }
}
