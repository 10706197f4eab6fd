import { Migration } from '@mikro-orm/migrations';

/** Each repository's refs as last recorded with push events (see src/repos/changes.ts). */
export class Migration0006RepoRefStates extends Migration {
  override name = '0006-repo-ref-states';

  override up(): void {
    this.addSql(`
      create table repo_ref_states (
        repo_id integer primary key references repos(id) on delete cascade,
        state jsonb not null,
        updated_at timestamptz not null default now()
      )`);
  }
}
