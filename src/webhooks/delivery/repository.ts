import { count, first, type Db } from '../../db/query.ts';
import { intArray } from '../../db/sql.ts';
import type { ApiVariant } from '../../domain/variant.ts';
import { DISABLED_ENTRY } from '../schemas.ts';
import { pauseJobs, type JobKind, type RequestRecord, type ResponseRecord } from '../repository.ts';

/**
 * The queries of delivery, on the feature's own tables: claiming jobs, writing attempts and their
 * consequences.
 */

/** An active webhook events are fanned out to. */
export type ActiveHookRow = {
  id: number;
  org_id: number;
  repo_id: number | null;
  events: string[];
  /** The variant it was created in: the event names it subscribes to and receives. */
  api_variant: ApiVariant;
  url: string;
  secret: string | null;
  created_at: Date | string;
};

/** A job as a dispatcher claimed it, with what it needs of its webhook. */
export type ClaimedJob = {
  id: string;
  webhook_id: number;
  delivery_id: string;
  event_id: string | null;
  event_type: string;
  body: string;
  kind: JobKind;
  /** The number of this attempt of the delivery. */
  attempt: number;
  /** Failed attempts of this job so far (the retry schedule's position). */
  failures: number;
  lease: string;
  /** Set when an earlier claim's lease ran out: that attempt was interrupted. */
  old_lease: string | null;
  url: string;
  secret: string | null;
  is_active: boolean;
};

export type AttemptRecord = {
  job: ClaimedJob;
  attempt: number;
  success: boolean;
  responseCode: number;
  durationMs: number;
  error: string | null;
  request: RequestRecord | null;
  response: ResponseRecord | null;
};

/** Active webhooks of these repositories and organizations (to fan events out to). */
export function activeFor(db: Db, repoIds: number[], orgIds: number[]): Promise<ActiveHookRow[]> {
  return db.execute<ActiveHookRow[]>(
    `select id, org_id, repo_id, events, api_variant, url, secret, created_at from webhooks
     where is_active and (repo_id = any(?::int[]) or (repo_id is null and org_id = any(?::int[])))`,
    [intArray(repoIds), intArray(orgIds)],
  );
}

/**
 * Claims up to `limit` due jobs for `leaseMs` (FOR UPDATE SKIP LOCKED: replicas never share
 * one), none of the webhooks in `skipWebhooks` (those already busy on this replica).
 */
export function claim(
  db: Db,
  lease: string,
  leaseMs: number,
  limit: number,
  skipWebhooks: readonly number[],
): Promise<ClaimedJob[]> {
  return db.execute<ClaimedJob[]>(
    `with c as (
       select id, lease as old_lease from webhook_jobs
       where next_attempt_at <= now() and webhook_id <> all(?::int[])
       order by next_attempt_at limit ? for update skip locked
     )
     update webhook_jobs j set lease = ?, attempt = j.attempt + 1,
       next_attempt_at = now() + ? * interval '1 millisecond'
     from c, webhooks w
     where j.id = c.id and w.id = j.webhook_id
     returning j.id, j.webhook_id, j.delivery_id, j.event_id, j.event_type, j.body, j.kind, j.attempt,
       j.failures, j.lease, c.old_lease, w.url, w.secret, w.is_active`,
    [intArray(skipWebhooks), limit, lease, leaseMs],
  );
}

/** When the next job falls due (null: none waiting), leaving out the webhooks in `skipWebhooks`. */
export async function nextDue(db: Db, skipWebhooks: readonly number[]): Promise<Date | null> {
  const r = await first<{ at: Date | string | null }>(
    db,
    `select min(next_attempt_at) as at from webhook_jobs
     where next_attempt_at < 'infinity' and webhook_id <> all(?::int[])`,
    [intArray(skipWebhooks)],
  );
  return r?.at === undefined || r.at === null ? null : new Date(r.at);
}

/** Jobs waiting for an attempt (paused ones included). */
export function queued(db: Db): Promise<number> {
  return count(db, `select count(*) as n from webhook_jobs`);
}

/** A job claimed for an inactive webhook goes back to waiting, unsent and unchanged. */
export async function pauseJob(db: Db, job: ClaimedJob): Promise<void> {
  await db.execute(
    `update webhook_jobs set next_attempt_at = 'infinity', lease = null, attempt = attempt - 1
     where id = ? and lease = ?`,
    [job.id, job.lease],
  );
}

/**
 * Successes, in one statement: their history records, the end of their jobs (if still leased
 * to the caller), and the failure counts of their webhooks reset.
 */
export async function recordSuccesses(db: Db, records: readonly AttemptRecord[]): Promise<void> {
  const rows = records.map((r, n) => {
    const values = attemptParams(r);
    const row: Record<string, unknown> = { n, job_id: r.job.id, lease: r.job.lease };
    ATTEMPT_FIELDS.forEach((f, i) => (row[f] = values[i]));
    return { ...row, request: r.request, response: r.response };
  });
  await db.execute(
    `with r as (
       select * from jsonb_to_recordset(?::jsonb) as r(n int, webhook_id int, delivery_id uuid,
         event_id bigint, event_type text, attempt int, redelivery boolean, success boolean,
         response_code int, duration_ms int, error text, request jsonb, response jsonb,
         job_id bigint, lease uuid)
     ), h as (
       insert into webhook_deliveries (${ATTEMPT_FIELDS.join(', ')})
       select ${ATTEMPT_FIELDS.join(', ')} from r
       where exists (select 1 from webhooks w where w.id = r.webhook_id) order by n
     ), j as (
       delete from webhook_jobs j using r where j.id = r.job_id and j.lease = r.lease
     )
     update webhooks w set consecutive_failures = 0
     from (select distinct webhook_id from r) x
     where w.id = x.webhook_id and w.consecutive_failures <> 0`,
    [JSON.stringify(rows)],
  );
}

/** Writes a failed attempt (the caller's transaction). */
export async function insertAttempt(tx: Db, r: AttemptRecord): Promise<void> {
  await tx.execute(INSERT_ATTEMPT, attemptParams(r));
}

/** Counts a failed delivery against an active webhook; returns the new consecutive count (undefined: inactive). */
export async function countFailure(tx: Db, webhookId: number): Promise<number | undefined> {
  const r = await first<{ n: number }>(
    tx,
    `update webhooks set consecutive_failures = consecutive_failures + 1 where id = ? and is_active
     returning consecutive_failures as n`,
    [webhookId],
  );
  return r?.n;
}

/** Disables an active webhook with a reason, writes the `webhook.disabled` entry, pauses its jobs. */
export async function disable(
  tx: Db,
  webhookId: number,
  reason: string,
  deliveryId: string,
): Promise<boolean> {
  const row = await first<{ id: number }>(
    tx,
    `update webhooks set is_active = false, disabled_reason = ?, updated_at = now()
     where id = ? and is_active returning id`,
    [reason, webhookId],
  );
  if (row === undefined) return false;
  await tx.execute(
    `insert into webhook_deliveries (webhook_id, delivery_id, event_type, attempt, success, response_code,
       duration_ms, error) values (?, ?, '${DISABLED_ENTRY}', 0, false, 0, 0, ?)`,
    [webhookId, deliveryId, reason],
  );
  await pauseJobs(tx, webhookId);
  return true;
}

/** Schedules the job's next attempt (paused instead when its webhook is inactive now). */
export async function retryLater(tx: Db, job: ClaimedJob, delayMs: number): Promise<void> {
  await tx.execute(
    `update webhook_jobs set failures = failures + 1, lease = null,
       next_attempt_at = case when (select is_active from webhooks where id = ?)
         then now() + ? * interval '1 millisecond' else 'infinity' end
     where id = ? and lease = ?`,
    [job.webhook_id, delayMs, job.id, job.lease],
  );
}

/** Ends a job (its lease still the caller's). */
export async function finish(tx: Db, job: ClaimedJob): Promise<void> {
  await tx.execute(`delete from webhook_jobs where id = ? and lease = ?`, [job.id, job.lease]);
}

/** Keeps a webhook's history to its newest `max` records and none older than `maxAgeMs`. */
export async function prune(db: Db, webhookId: number, max: number, maxAgeMs: number): Promise<void> {
  await db.execute(
    `delete from webhook_deliveries where webhook_id = ? and (
       delivered_at < now() - ? * interval '1 millisecond'
       or id <= (select id from webhook_deliveries where webhook_id = ? order by id desc offset ? limit 1))`,
    [webhookId, maxAgeMs, webhookId, max],
  );
}

/** Drops every history record older than `maxAgeMs`. */
export async function pruneOld(db: Db, maxAgeMs: number): Promise<void> {
  await db.execute(
    `delete from webhook_deliveries where delivered_at < now() - ? * interval '1 millisecond'`,
    [maxAgeMs],
  );
}

const ATTEMPT_FIELDS = [
  'webhook_id',
  'delivery_id',
  'event_id',
  'event_type',
  'attempt',
  'redelivery',
  'success',
  'response_code',
  'duration_ms',
  'error',
  'request',
  'response',
] as const;
const INSERT_ATTEMPT = `insert into webhook_deliveries (${ATTEMPT_FIELDS.join(', ')})
  values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb)`;

function attemptParams(r: AttemptRecord): unknown[] {
  return [
    r.job.webhook_id,
    r.job.delivery_id,
    r.job.event_id,
    r.job.event_type,
    r.attempt,
    r.job.kind === 'redelivery',
    r.success,
    r.responseCode,
    r.durationMs,
    r.error,
    r.request === null ? null : JSON.stringify(r.request),
    r.response === null ? null : JSON.stringify(r.response),
  ];
}

/**
 * Seconds since the oldest delivery still to make (first attempt or retry) was queued; paused jobs
 * of inactive webhooks do not count (0 when none waits).
 */
export async function oldestPendingAge(db: Db): Promise<number> {
  const r = await first<{ age: string | number | null }>(
    db,
    `select extract(epoch from now() - min(created_at)) as age from webhook_jobs
     where next_attempt_at < 'infinity'`,
  );
  return Math.max(0, Number(r?.age ?? 0));
}
