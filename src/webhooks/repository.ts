import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray } from '../db/sql.ts';
import { DISABLED_ENTRY } from './schemas.ts';
import type { DeliveryDetailRow, DeliveryRow, WebhookRow } from './records.ts';

/** Whose webhooks: a repository's (`repoId`) or an organization's (`repoId` null). */
export type Owner = { orgId: number; repoId: number | null };

export type JobKind = 'event' | 'redelivery' | 'ping';

export type NewJob = {
  webhookId: number;
  deliveryId: string;
  eventId: string | null;
  eventType: string;
  body: string;
  kind: JobKind;
  /** Attempts the delivery already had (the next one is `attempt + 1`). */
  attempt: number;
};

const HOOK_COLUMNS = `w.id, w.org_id, w.repo_id, w.url, w.secret, w.events, w.is_active, w.disabled_reason,
  w.consecutive_failures, w.created_at, w.updated_at,
  l.id as last_id, l.success as last_success, l.response_code as last_response_code,
  l.delivered_at as last_delivered_at`;
const LAST_DELIVERY = `left join lateral (
    select d.id, d.success, d.response_code, d.delivered_at from webhook_deliveries d
    where d.webhook_id = w.id and d.event_type <> '${DISABLED_ENTRY}' order by d.id desc limit 1
  ) l on true`;
const OWNED = `(case when ?::int is null then w.repo_id is null and w.org_id = ? else w.repo_id = ?::int end)`;
const ownedParams = (o: Owner) => [o.repoId, o.orgId, o.repoId];

const DELIVERY_COLUMNS = `id, webhook_id, delivery_id, event_id, event_type, attempt, redelivery, success,
  response_code, duration_ms, error, delivered_at`;

/** The queries of the webhooks feature, on its own tables only. */
export const webhooksRepository = {
  // ------------------------------------------------------------------ webhooks

  async list(em: EntityManager, owner: Owner, limit: number, offset: number) {
    const rows = await em.execute<WebhookRow[]>(
      `select ${HOOK_COLUMNS} from webhooks w ${LAST_DELIVERY} where ${OWNED} order by w.id limit ? offset ?`,
      [...ownedParams(owner), limit, offset],
    );
    const [count] = await em.execute<{ n: string }[]>(
      `select count(*) as n from webhooks w where ${OWNED}`,
      ownedParams(owner),
    );
    return { rows, total: Number(count?.n ?? 0) };
  },

  async count(em: EntityManager, owner: Owner): Promise<number> {
    const [r] = await em.execute<{ n: string }[]>(
      `select count(*) as n from webhooks w where ${OWNED}`,
      ownedParams(owner),
    );
    return Number(r?.n ?? 0);
  },

  async get(em: EntityManager, owner: Owner, id: number): Promise<WebhookRow | undefined> {
    const [row] = await em.execute<WebhookRow[]>(
      `select ${HOOK_COLUMNS} from webhooks w ${LAST_DELIVERY} where w.id = ? and ${OWNED}`,
      [id, ...ownedParams(owner)],
    );
    return row;
  },

  async insert(
    em: EntityManager,
    owner: Owner,
    h: { url: string; secret: string | null; events: string[]; isActive: boolean; createdBy: number },
  ): Promise<number> {
    const [row] = await em.execute<{ id: number }[]>(
      `insert into webhooks (org_id, repo_id, url, secret, events, is_active, created_by)
       values (?, ?, ?, ?, ?::text[], ?, ?) returning id`,
      [owner.orgId, owner.repoId, h.url, h.secret, textArray(h.events), h.isActive, h.createdBy],
    );
    return row!.id;
  },

  /**
   * Changes a webhook. Activating clears the disabled reason and the failure count and makes its
   * paused jobs due; deactivating pauses its jobs.
   */
  async update(
    tx: EntityManager,
    id: number,
    f: { url?: string; secret?: string | null; events?: string[]; isActive?: boolean },
  ): Promise<void> {
    const sets: string[] = ['updated_at = now()'];
    const params: unknown[] = [];
    const set = (sql: string, value: unknown) => {
      sets.push(sql);
      params.push(value);
    };
    if (f.url !== undefined) set('url = ?', f.url);
    if (f.secret !== undefined) set('secret = ?', f.secret);
    if (f.events !== undefined) set('events = ?::text[]', textArray(f.events));
    if (f.isActive === true) sets.push('is_active = true, disabled_reason = null, consecutive_failures = 0');
    if (f.isActive === false) sets.push('is_active = false');
    await tx.execute(`update webhooks set ${sets.join(', ')} where id = ?`, [...params, id]);
    if (f.isActive === true) {
      await tx.execute(
        `update webhook_jobs set next_attempt_at = now() where webhook_id = ? and next_attempt_at = 'infinity'`,
        [id],
      );
    }
    if (f.isActive === false) await pauseJobs(tx, id);
  },

  async delete(em: EntityManager, owner: Owner, id: number): Promise<boolean> {
    const rows = await em.execute<{ id: number }[]>(
      `delete from webhooks w where w.id = ? and ${OWNED} returning w.id`,
      [id, ...ownedParams(owner)],
    );
    return rows.length > 0;
  },

  // ------------------------------------------------------------------ history

  async recent(em: EntityManager, webhookId: number, limit: number): Promise<DeliveryRow[]> {
    return em.execute<DeliveryRow[]>(
      `select ${DELIVERY_COLUMNS} from webhook_deliveries where webhook_id = ? order by id desc limit ?`,
      [webhookId, limit],
    );
  },

  async detail(em: EntityManager, webhookId: number, id: number): Promise<DeliveryDetailRow | undefined> {
    const [row] = await em.execute<DeliveryDetailRow[]>(
      `select ${DELIVERY_COLUMNS}, request, response from webhook_deliveries where webhook_id = ? and id = ?`,
      [webhookId, id],
    );
    return row;
  },

  /** The highest attempt number a delivery has had (history and a pending job). */
  async lastAttempt(em: EntityManager, webhookId: number, deliveryId: string): Promise<number> {
    const [r] = await em.execute<{ n: number | null }[]>(
      `select max(attempt) as n from webhook_deliveries where webhook_id = ? and delivery_id = ?`,
      [webhookId, deliveryId],
    );
    return r?.n ?? 0;
  },

  /**
   * Queues a redelivery of every delivery of the webhook whose latest attempt failed at or after
   * `since` and that has no attempt pending already. Returns the delivery ids queued.
   */
  async queueFailedSince(
    em: EntityManager,
    webhookId: number,
    since: Date,
    limit: number,
  ): Promise<string[]> {
    const rows = await em.execute<{ delivery_id: string }[]>(
      `insert into webhook_jobs (webhook_id, delivery_id, event_id, event_type, body, kind, attempt, next_attempt_at)
       select webhook_id, delivery_id, event_id, event_type, body, 'redelivery', attempt, now() from (
         select distinct on (d.delivery_id) d.webhook_id, d.delivery_id, d.event_id, d.event_type,
           d.request->>'body' as body, d.success, d.delivered_at,
           max(d.attempt) over (partition by d.delivery_id) as attempt
         from webhook_deliveries d
         where d.webhook_id = ? and d.event_type <> '${DISABLED_ENTRY}' and d.request is not null
         order by d.delivery_id, d.id desc
       ) latest
       where not latest.success and latest.delivered_at >= ?
         and not exists (select 1 from webhook_jobs j where j.webhook_id = latest.webhook_id
                         and j.delivery_id = latest.delivery_id)
       order by latest.delivered_at
       limit ?
       on conflict do nothing
       returning delivery_id`,
      [webhookId, since, limit],
    );
    return rows.map((r) => r.delivery_id);
  },

  // ------------------------------------------------------------------ dispatching

  /**
   * Inserts jobs; with a `lease` they are claimed by the caller at once (attempt 1 under way,
   * due again when the lease ends), otherwise due now. Returns the inserted ids in order.
   */
  async insertJobs(em: EntityManager, jobs: readonly NewJob[], lease?: { id: string; ms: number }) {
    if (jobs.length === 0) return [];
    const row =
      lease === undefined
        ? `(?, ?, ?, ?, ?, ?, ?, now(), null)`
        : `(?, ?, ?, ?, ?, ?, ?, now() + ? * interval '1 millisecond', ?)`;
    const params: unknown[] = [];
    for (const j of jobs) {
      params.push(j.webhookId, j.deliveryId, j.eventId, j.eventType, j.body, j.kind);
      if (lease === undefined) params.push(j.attempt);
      else params.push(j.attempt + 1, lease.ms, lease.id);
    }
    const rows = await em.execute<{ id: string }[]>(
      `insert into webhook_jobs (webhook_id, delivery_id, event_id, event_type, body, kind, attempt, next_attempt_at, lease)
       values ${jobs.map(() => row).join(', ')} returning id`,
      params,
    );
    return rows.map((r) => r.id);
  },

  /** Puts a webhook's waiting jobs on hold (`infinity`) while it is inactive. */
  pauseJobs,
};

async function pauseJobs(tx: EntityManager, webhookId: number): Promise<void> {
  await tx.execute(
    `update webhook_jobs set next_attempt_at = 'infinity' where webhook_id = ? and lease is null`,
    [webhookId],
  );
}
