import { Migration } from '@mikro-orm/migrations';

/**
 * Storage nodes (docs/storage.md): each `triad storage` process registers itself (name, address,
 * room on its volume, state) and heartbeats; a repository's row names the node that holds it
 * (null: the server's own repository directory, the embedded and local forms).
 */
export class Migration0020StorageNodes extends Migration {
  override name = '0020-storage-nodes';

  override up(): void {
    this.addSql(`
      create table storage_nodes (
        name text primary key check (name ~ '^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$'),
        address text not null,
        state text not null default 'up' check (state in ('up', 'draining')),
        capacity_bytes bigint not null default 0,
        free_bytes bigint not null default 0,
        version text not null default '',
        registered_at timestamptz not null default now(),
        heartbeat_at timestamptz not null default now()
      )`);
    this.addSql(`alter table repos add column storage_node text references storage_nodes(name)`);
    this.addSql(`create index repos_storage_node on repos (storage_node) where storage_node is not null`);
  }

  override down(): void {
    this.addSql('alter table repos drop column storage_node');
    this.addSql('drop table storage_nodes');
  }
}
