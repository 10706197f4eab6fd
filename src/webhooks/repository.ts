import { Assignments, count, first, one, type Db } from '../db/query.ts';
import { textArray } from '../db/sql.ts';
import { DISABLED_ENTRY } from './schemas.ts';
import type { ApiVariant } from '../domain/variant.ts';

/**
 * The queries of the webhooks feature on `webhooks`, `webhook_jobs` and `webhook_deliveries`
 * (the dispatcher's own are in `delivery/repository.ts`), and their rows.
 */

export type WebhookRow = {
  id: number;
  org_id: number;
  repo_id: number | null;
  url: string;
  secret: string | null;
  events: string[];
  /** The API variant of the request that created it: the event names it receives. */
  api_variant: ApiVariant;
  is_active: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  created_at: Date | string;
  updated_at: Date | string;
  last_id: string | null;
  last_success: boolean | null;
  last_response_code: number | null;
  last_delivered_at: Date | string | null;
};

export type DeliveryRow = {
  id: string;
  webhook_id: number;
  delivery_id: string;
  event_id: string | null;
  event_type: string;
  attempt: number;
  redelivery: boolean;
  success: boolean;
  response_code: number;
  duration_ms: number;
  error: string | null;
  delivered_at: Date | string;
};

export type RequestRecord = { url: string; headers: Record<string, string>; body: string };
export type ResponseRecord = { headers: Record<string, string>; body: string };
export type DeliveryDetailRow = DeliveryRow & {
  request: RequestRecord | null;
  response: ResponseRecord | null;
};

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

const HOOK_COLUMNS = `w.id, w.org_id, w.repo_id, w.url, w.secret, w.events, w.api_variant, w.is_active,
  w.disabled_reason,
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

// ----- webhooks ----------------------------------------------------------------------------------

/** One page of an owner's webhooks, by id. */
export function page(db: Db, owner: Owner, limit: number, offset: number): Promise<WebhookRow[]> {
  return db.execute<WebhookRow[]>(
    `select ${HOOK_COLUMNS} from webhooks w ${LAST_DELIVERY} where ${OWNED} order by w.id limit ? offset ?`,
    [...ownedParams(owner), limit, offset],
  );
}

/** How many webhooks an owner has. */
export function countOwned(db: Db, owner: Owner): Promise<number> {
  return count(db, `select count(*) as n from webhooks w where ${OWNED}`, ownedParams(owner));
}

export function get(db: Db, owner: Owner, id: number): Promise<WebhookRow | undefined> {
  return first<WebhookRow>(
    db,
    `select ${HOOK_COLUMNS} from webhooks w ${LAST_DELIVERY} where w.id = ? and ${OWNED}`,
    [id, ...ownedParams(owner)],
  );
}

/** Inserts a webhook; returns its id. */
export async function insert(
  db: Db,
  owner: Owner,
  h: {
    url: string;
    secret: string | null;
    events: string[];
    isActive: boolean;
    createdBy: number;
    apiVariant: ApiVariant;
  },
): Promise<number> {
  const row = await one<{ id: number }>(
    db,
    `insert into webhooks (org_id, repo_id, url, secret, events, is_active, created_by, api_variant)
     values (?, ?, ?, ?, ?::text[], ?, ?, ?) returning id`,
    [owner.orgId, owner.repoId, h.url, h.secret, textArray(h.events), h.isActive, h.createdBy, h.apiVariant],
  );
  return row.id;
}

export type WebhookChange = { url?: string; secret?: string | null; events?: string[]; isActive?: boolean };

/**
 * Changes a webhook. Activating clears the disabled reason and the failure count and makes its
 * paused jobs due; deactivating pauses its jobs.
 */
export async function update(tx: Db, id: number, f: WebhookChange): Promise<void> {
  const a = new Assignments('updated_at = now()');
  if (f.url !== undefined) a.add('url = ?', f.url);
  if (f.secret !== undefined) a.add('secret = ?', f.secret);
  if (f.events !== undefined) a.add('events = ?::text[]', textArray(f.events));
  if (f.isActive === true) a.add('is_active = true, disabled_reason = null, consecutive_failures = 0');
  if (f.isActive === false) a.add('is_active = false');
  await tx.execute(`update webhooks set ${a.sql} where id = ?`, [...a.params, id]);
  if (f.isActive === true) {
    await tx.execute(
      `update webhook_jobs set next_attempt_at = now() where webhook_id = ? and next_attempt_at = 'infinity'`,
      [id],
    );
  }
  if (f.isActive === false) await pauseJobs(tx, id);
}

/** Deletes an owner's webhook (its jobs and history go with it); false when it has none of that id. */
export async function remove(db: Db, owner: Owner, id: number): Promise<boolean> {
  const row = await first<{ id: number }>(
    db,
    `delete from webhooks w where w.id = ? and ${OWNED} returning w.id`,
    [id, ...ownedParams(owner)],
  );
  return row !== undefined;
}

// ----- history -----------------------------------------------------------------------------------

/** A webhook's newest history records. */
export function recent(db: Db, webhookId: number, limit: number): Promise<DeliveryRow[]> {
  return db.execute<DeliveryRow[]>(
    `select ${DELIVERY_COLUMNS} from webhook_deliveries where webhook_id = ? order by id desc limit ?`,
    [webhookId, limit],
  );
}

export function detail(db: Db, webhookId: number, id: number): Promise<DeliveryDetailRow | undefined> {
  return first<DeliveryDetailRow>(
    db,
    `select ${DELIVERY_COLUMNS}, request, response from webhook_deliveries where webhook_id = ? and id = ?`,
    [webhookId, id],
  );
}

/** The highest attempt number a delivery has had (history and a pending job). */
export async function lastAttempt(db: Db, webhookId: number, deliveryId: string): Promise<number> {
  const r = await one<{ n: number | null }>(
    db,
    `select max(attempt) as n from webhook_deliveries where webhook_id = ? and delivery_id = ?`,
    [webhookId, deliveryId],
  );
  return r.n ?? 0;
}

/**
 * Queues a redelivery of every delivery of the webhook whose latest attempt failed at or after
 * `since` and that has no attempt pending already. Returns the delivery ids queued.
 */
export async function queueFailedSince(
  db: Db,
  webhookId: number,
  since: Date,
  limit: number,
): Promise<string[]> {
  const rows = await db.execute<{ delivery_id: string }[]>(
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
}

// ----- jobs --------------------------------------------------------------------------------------

/**
 * Inserts jobs; with a `lease` they are claimed by the caller at once (attempt 1 under way,
 * due again when the lease ends), otherwise due now. Returns the inserted ids in order.
 */
export async function insertJobs(
  db: Db,
  jobs: readonly NewJob[],
  lease?: { id: string; ms: number },
): Promise<string[]> {
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
  const rows = await db.execute<{ id: string }[]>(
    `insert into webhook_jobs (webhook_id, delivery_id, event_id, event_type, body, kind, attempt, next_attempt_at, lease)
     values ${jobs.map(() => row).join(', ')} returning id`,
    params,
  );
  return rows.map((r) => r.id);
}

/** Puts a webhook's waiting jobs on hold (`infinity`) while it is inactive. */
export async function pauseJobs(tx: Db, webhookId: number): Promise<void> {
  await tx.execute(
    `update webhook_jobs set next_attempt_at = 'infinity' where webhook_id = ? and lease is null`,
    [webhookId],
  );
}
