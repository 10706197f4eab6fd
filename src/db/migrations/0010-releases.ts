import { Migration } from '@mikro-orm/migrations';

/**
 * Releases and their assets.
 *
 * - `releases`: one per tag and repository (`releases_tag_key`); `published_at` is null while a
 *   release is a draft. Lists are newest first by `(repo_id, created_at desc, id desc)`.
 * - `release_assets`: the bytes live in the blob store under `blob_key` (unique); a row is
 *   inserted only after its object was stored, and an object is deleted only after its row, so
 *   the only leftovers a crash can make are objects without a row, which the sweeper removes.
 *   Names are unique within a release.
 */
export class Migration0010Releases extends Migration {
  override name = '0010-releases';

  override up(): void {
    this.addSql(`
      create table releases (
        id serial primary key,
        repo_id integer not null references repos(id) on delete cascade,
        tag_name varchar(255) not null,
        target_commitish varchar(255) not null,
        name text not null default '',
        body text not null default '',
        draft boolean not null default false,
        prerelease boolean not null default false,
        author_id integer references users(id) on delete set null,
        created_at timestamptz not null default now(),
        published_at timestamptz,
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index releases_tag_key on releases (repo_id, tag_name)`);
    this.addSql(`create index releases_list_idx on releases (repo_id, created_at desc, id desc)`);
    this.addSql(`
      create table release_assets (
        id serial primary key,
        release_id integer not null references releases(id) on delete cascade,
        repo_id integer not null references repos(id) on delete cascade,
        name varchar(255) not null,
        label text not null default '',
        size bigint not null,
        content_type varchar(255) not null,
        sha256 char(64) not null,
        blob_key text not null,
        download_count integer not null default 0,
        uploader_id integer references users(id) on delete set null,
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index release_assets_name_key on release_assets (release_id, name)`);
    this.addSql(`create unique index release_assets_blob_key on release_assets (blob_key)`);
  }

  override down(): void {
    this.addSql('drop table if exists release_assets');
    this.addSql('drop table if exists releases');
  }
}
