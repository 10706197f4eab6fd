import type { EntityManager } from '@mikro-orm/postgresql';
import type { DomainEvent } from './catalog.ts';
import * as db from './repository.ts';

/**
 * Transactional outbox: call with the transaction's entity manager, so the event row commits
 * (or rolls back) together with the change that caused it. Only events of the catalog
 * (catalog.ts) are accepted. Dispatchers consume the rows with `FOR UPDATE SKIP LOCKED`.
 */
export async function emitEvents(tx: EntityManager, events: readonly DomainEvent[]): Promise<void> {
  for (const e of events) await db.insertEvent(tx, e);
  if (events.length > 0) await db.notifyRecorded(tx);
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
export async function claimUndispatched(tx: EntityManager, limit: number): Promise<OutboxEvent[]> {
  return tx.execute<OutboxEvent[]>(
    `select id, event_type, repo_id, sender_id, payload, created_at from outbox_events
     where dispatched_at is null order by id limit ? for update skip locked`,
    [limit],
  );
}

export async function markDispatched(tx: EntityManager, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await tx.execute(`update outbox_events set dispatched_at = now() where id = any(?::bigint[])`, [
    `{${ids.join(',')}}`,
  ]);
}
