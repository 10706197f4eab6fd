import net from 'node:net';
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

/** Sends `request` (raw HTTP) on a connection of its own to the server at `serverUrl`; no answer is read. */
export async function rawRequest(serverUrl: string, request: string): Promise<net.Socket> {
  const { hostname, port } = new URL(serverUrl);
  const sock = net.connect(Number(port), hostname);
  await new Promise<void>((res, rej) => sock.once('connect', res).once('error', rej));
  sock.on('error', () => undefined);
  sock.write(request);
  return sock;
}

/**
 * A client that leaves while the server waits on a lock: `lock` (SQL and its parameters) is
 * taken in a transaction of its own, `request` is sent, and once a server statement matching
 * `like` waits on the lock the connection is closed; after a moment for the server to hear of
 * that, the lock is released.
 */
export async function leaveWhileLocked(o: {
  dbUrl: string;
  serverUrl: string;
  lock: [string, unknown[]];
  request: string;
  like: string;
  what: string;
}): Promise<void> {
  const locker = new pg.Client({ connectionString: o.dbUrl });
  await locker.connect();
  let sock: net.Socket | undefined;
  try {
    await locker.query('begin');
    await locker.query(...o.lock);
    sock = await rawRequest(o.serverUrl, o.request);
    await waitForLockWait(o.dbUrl, o.like, o.what);
    sock.destroy();
    await new Promise((r) => setTimeout(r, 500));
  } finally {
    sock?.destroy();
    await locker.query('commit').catch(() => undefined);
    await locker.end();
  }
}

/**
 * Runs `during` while `lock` (SQL and its parameters) is held in a transaction of a connection of
 * its own; once a server statement matching `like` waits on it (and `hold` ms more, if given),
 * the lock is released. Answers what `during` started, awaited after the release.
 */
export async function whileLocked<T>(o: {
  dbUrl: string;
  lock: [string, unknown[]];
  like: string;
  what: string;
  hold?: number;
  during: () => Promise<T>;
}): Promise<T> {
  const locker = new pg.Client({ connectionString: o.dbUrl });
  await locker.connect();
  try {
    await locker.query('begin');
    await locker.query(...o.lock);
    const started = o.during();
    started.catch(() => undefined);
    await waitForLockWait(o.dbUrl, o.like, o.what);
    if (o.hold !== undefined) await new Promise((r) => setTimeout(r, o.hold));
    await locker.query('commit');
    return await started;
  } finally {
    await locker.query('rollback').catch(() => undefined);
    await locker.end();
  }
}
