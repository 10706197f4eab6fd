import type { EntityManager } from '@mikro-orm/postgresql';
import type { DomainEvent } from './catalog.ts';
import * as db from './repository.ts';
import { inSpan } from '../telemetry/spans.ts';

/**
 * Transactional outbox: call with the transaction's entity manager, so the event row commits
 * (or rolls back) together with the change that caused it. Only events of the catalog
 * (catalog.ts) are accepted. Dispatchers consume the rows with `FOR UPDATE SKIP LOCKED`.
 */
export async function emitEvents(tx: EntityManager, events: readonly DomainEvent[]): Promise<void> {
  if (events.length === 0) return;
  const types = [...new Set(events.map((e) => e.type))];
  const attributes = { 'outbox.events': events.length, 'outbox.event_types': types };
  await inSpan('outbox.write', { attributes }, async () => {
    for (const e of events) await db.insertEvent(tx, e);
    await db.notifyRecorded(tx);
  });
}

export { claimUndispatched, markDispatched, type OutboxEvent } from './repository.ts';
