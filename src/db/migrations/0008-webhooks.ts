import { Migration } from '@mikro-orm/migrations';

/**
 * Webhooks (repository and organization), their delivery queue and their delivery history.
 *
 * - `webhooks`: `repo_id` null = an organization webhook (every repository of `org_id`). The
 *   secret is kept in clear text because every delivery is signed with it (HMAC needs the key).
 * - `webhook_jobs`: one row per delivery still to be attempted (an event fanned out to a hook, a
 *   retry, a redelivery or a ping). `next_attempt_at` is when it is due; a dispatcher claims a
 *   due row with `FOR UPDATE SKIP LOCKED` and moves `next_attempt_at` to the end of its lease,
 *   so a replica that dies mid-delivery leaves a row that becomes due again when the lease ends.
 *   Paused rows (inactive hook) wait at `infinity`. One job per delivery id and hook.
 * - `webhook_deliveries`: every attempt made (and `webhook.disabled` entries), newest by `id`.
 */
export class Migration0008Webhooks extends Migration {
  override name = '0008-webhooks';

  override up(): void {
    this.addSql(`
      create table webhooks (
        id serial primary key,
        org_id integer not null references orgs(id) on delete cascade,
        repo_id integer references repos(id) on delete cascade,
        url text not null,
        secret text,
        events text[] not null,
        is_active boolean not null default true,
        disabled_reason text,
        consecutive_failures integer not null default 0,
        created_by integer references users(id) on delete set null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index webhooks_repo_idx on webhooks (repo_id, id) where repo_id is not null`);
    this.addSql(`create index webhooks_org_idx on webhooks (org_id, id) where repo_id is null`);

    this.addSql(`
      create table webhook_jobs (
        id bigserial primary key,
        webhook_id integer not null references webhooks(id) on delete cascade,
        delivery_id uuid not null,
        event_id bigint,
        event_type varchar(64) not null,
        body text not null,
        kind varchar(16) not null check (kind in ('event', 'redelivery', 'ping')),
        attempt integer not null default 0,
        failures integer not null default 0,
        next_attempt_at timestamptz not null,
        lease uuid,
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create index webhook_jobs_due_idx on webhook_jobs (next_attempt_at)`);
    this.addSql(`create unique index webhook_jobs_delivery_key on webhook_jobs (webhook_id, delivery_id)`);

    this.addSql(`
      create table webhook_deliveries (
        id bigserial primary key,
        webhook_id integer not null references webhooks(id) on delete cascade,
        delivery_id uuid not null,
        event_id bigint,
        event_type varchar(64) not null,
        attempt integer not null,
        redelivery boolean not null default false,
        success boolean not null,
        response_code integer not null,
        duration_ms integer not null,
        error text,
        request jsonb,
        response jsonb,
        delivered_at timestamptz not null default now()
      )`);
    this.addSql(`create index webhook_deliveries_hook_idx on webhook_deliveries (webhook_id, id)`);
    this.addSql(
      `create index webhook_deliveries_delivery_idx on webhook_deliveries (webhook_id, delivery_id, id)`,
    );
    this.addSql(`create index webhook_deliveries_age_idx on webhook_deliveries (delivered_at)`);
    // Events written before webhooks existed have nobody to go to: the dispatcher starts after them.
    this.addSql(`update outbox_events set dispatched_at = now() where dispatched_at is null`);
  }
}
