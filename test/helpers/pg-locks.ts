import pg from 'pg';
import { waitUntil } from './wait.ts';

/**
 * Waits until a server's statement matching `like` (an SQL LIKE pattern of its text) waits on a
 * lock, seen from a connection of its own (in a transaction, pg_stat_activity is read only once).
 */
export async function waitForLockWait(dbUrl: string, like: string, what: string): Promise<void> {
  const watcher = new pg.Client({ connectionString: dbUrl });
  await watcher.connect();
  try {
    await waitUntil(
      what,
      async () =>
        (
          await watcher.query(
            `select 1 from pg_stat_activity
              where wait_event_type = 'Lock' and query like $1 and pid <> pg_backend_pid()`,
            [like],
          )
        ).rowCount! > 0,
      10_000,
    );
  } finally {
    await watcher.end();
  }
}
