import { Migration } from '@mikro-orm/migrations';

export class Migration0002Outbox extends Migration {
  override name = '0002-outbox';

  override up(): void {
    this.addSql(`
      create table outbox_events (
        id bigserial primary key,
        event_type varchar(64) not null,
        repo_id integer references repos(id) on delete cascade,
        sender_id integer references users(id) on delete set null,
        payload jsonb not null,
        created_at timestamptz not null default now(),
        dispatched_at timestamptz
      )`);
    this.addSql(`create index outbox_events_pending_idx on outbox_events (id) where dispatched_at is null`);
    this.addSql(`create index outbox_events_repo_idx on outbox_events (repo_id, id)`);
  }
}
