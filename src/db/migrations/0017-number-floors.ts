import { Migration } from '@mikro-orm/migrations';

/**
 * Per-repository numbers are never reused after a deletion (pipelines can be deleted from the
 * web interface): `number_floors` keeps, per repository and kind, the highest number a deletion
 * removed; the allocator numbers past both it and the rows that remain.
 */
export class Migration0017NumberFloors extends Migration {
  override name = '0017-number-floors';

  override up(): void {
    this.addSql(`
      create table number_floors (
        repo_id integer not null references repos (id) on delete cascade,
        kind text not null,
        floor integer not null,
        primary key (repo_id, kind)
      )`);
  }

  override down(): void {
    this.addSql('drop table number_floors');
  }
}
