import type { EntityManager } from '@mikro-orm/postgresql';
import type { DomainEvent } from './catalog.ts';

/**
 * Transactional outbox: call with the transaction's entity manager, so the event row commits
 * (or rolls back) together with the change that caused it. Only events of the catalog
 * (catalog.ts) are accepted. Dispatchers consume the rows with `FOR UPDATE SKIP LOCKED`.
 */
export async function emitEvents(tx: EntityManager, events: readonly DomainEvent[]): Promise<void> {
  for (const e of events) {
    await tx.execute(
      'insert into outbox_events (event_type, repo_id, sender_id, payload) values (?, ?, ?, ?)',
      [e.type, e.repoId, e.senderId, JSON.stringify(e.payload)],
    );
  }
  if (events.length > 0) await tx.execute(`select pg_notify('triad_outbox', '')`);
}
