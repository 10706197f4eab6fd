import type { Db } from '../db/query.ts';

/** The queries of the outbox (table `outbox_events`). */

/** The channel dispatchers listen on to learn that events were recorded. */
const OUTBOX_CHANNEL = 'triad_outbox';

export type OutboxInsert = { type: string; repoId: number | null; senderId: number | null; payload: unknown };

export async function insertEvent(tx: Db, e: OutboxInsert): Promise<void> {
  await tx.execute(
    'insert into outbox_events (event_type, repo_id, sender_id, payload) values (?, ?, ?, ?)',
    [e.type, e.repoId, e.senderId, JSON.stringify(e.payload)],
  );
}

/** Wakes the dispatchers when the transaction commits. */
export async function notifyRecorded(tx: Db): Promise<void> {
  await tx.execute(`select pg_notify('${OUTBOX_CHANNEL}', '')`);
}

/** An outbox row as a consumer reads it. */
export type OutboxEvent = {
  id: string;
  event_type: string;
  repo_id: number | null;
  sender_id: number | null;
  payload: Record<string, unknown>;
  created_at: Date;
};

/**
 * Claims up to `limit` undispatched events, oldest first, in the caller's transaction
 * (`FOR UPDATE SKIP LOCKED`: concurrent consumers on any replica never get the same row). The
 * caller marks them with `markDispatched` in the same transaction.
 */
export async function claimUndispatched(tx: Db, limit: number): Promise<OutboxEvent[]> {
  return tx.execute<OutboxEvent[]>(
    `select id, event_type, repo_id, sender_id, payload, created_at from outbox_events
     where dispatched_at is null order by id limit ? for update skip locked`,
    [limit],
  );
}

export async function markDispatched(tx: Db, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await tx.execute('update outbox_events set dispatched_at = now() where id = any(?::bigint[])', [
    `{${ids.join(',')}}`,
  ]);
}

/** Seconds since the oldest event not yet dispatched was recorded (0 when none waits). */
export async function oldestUndispatchedAge(db: Db): Promise<number> {
  const rows = await db.execute<{ age: string | number }[]>(
    `select extract(epoch from now() - created_at) as age from outbox_events
     where dispatched_at is null order by id limit 1`,
  );
  return Math.max(0, Number(rows[0]?.age ?? 0));
}
