import { Migration } from '@mikro-orm/migrations';

/**
 * Pinned issues (the web interface's pins; no API): at most `TRIAD_MAX_PINNED_ISSUES` per
 * repository, shown above the issue list in `position` order (the order they were pinned). A
 * pin goes with its issue and its repository; a closed issue stays pinned until it is unpinned.
 */
export class Migration0015IssuePins extends Migration {
  override name = '0015-issue-pins';

  override up(): void {
    this.addSql(`
      create table issue_pins (
        issue_id integer primary key references issues(id) on delete cascade,
        repo_id integer not null references repos(id) on delete cascade,
        position integer not null,
        pinned_by integer references users(id) on delete set null,
        pinned_at timestamptz not null default now(),
        unique (repo_id, position)
      )`);
  }
}
