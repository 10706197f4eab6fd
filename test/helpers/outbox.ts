import pg from 'pg';
import type { TestServer } from './server.ts';

export type OutboxRow = { id: string; event_type: string; sender_id: number | null; payload: any };

/** The events a repository has put in the transactional outbox, oldest first. */
export async function outboxEvents(s: TestServer, repoId: number): Promise<OutboxRow[]> {
  const c = new pg.Client({ connectionString: s.dbUrl });
  await c.connect();
  try {
    const r = await c.query<OutboxRow>(
      'select id, event_type, sender_id, payload from outbox_events where repo_id = $1 order by id',
      [repoId],
    );
    return r.rows;
  } finally {
    await c.end();
  }
}
