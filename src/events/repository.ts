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
