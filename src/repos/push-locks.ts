import pg from 'pg';
import { PUSH_LOCK } from './repository.ts';

/** A repository's push lock, held by a session of its own until `release`. */
export type HeldPushLock = {
  /** The PostgreSQL backend holding it (`pg_locks.pid`). */
  readonly pid: number;
  /** True once its connection failed: the lock is gone with it. */
  readonly lost: boolean;
  /** Unlocks and gives the connection back (a failed unlock closes the connection instead). */
  release(): Promise<void>;
};

/**
 * The repositories' push locks (one writer per repository across every replica), as session-level
 * PostgreSQL advisory locks, each held on a connection of its own for the duration of a change.
 * So a push holds no transaction open while its backend process runs, and no connection of the
 * ORM's pool: a transaction-mode pooler in front of DATABASE_URL never sees a long transaction.
 * The connections come from `url`, which must reach PostgreSQL as one session
 * (DATABASE_DIRECT_URL behind a transaction-mode pooler). A replica that dies loses its
 * connections, and PostgreSQL releases their locks.
 */
export class PushLocks {
  private readonly pool: pg.Pool;

  constructor(url: string, max: number) {
    this.pool = new pg.Pool({
      connectionString: url,
      max,
      idleTimeoutMillis: 10_000,
      allowExitOnIdle: true,
      // a lock session sits idle while a push's backend runs: TCP keepalives keep middleboxes from
      // dropping it silently and let both ends notice a dead peer within minutes, not hours
      keepAlive: true,
      keepAliveInitialDelayMillis: 30_000,
    });
    // an idle connection that fails is dropped by the pool; the next acquire connects anew
    this.pool.on('error', () => undefined);
  }

  /**
   * Takes repository `repoId`'s lock: at once or not at all (`'try'`), or waiting at most `wait`
   * milliseconds. Undefined when it is held elsewhere (or the wait ran out).
   */
  async acquire(repoId: number, wait: number | 'try'): Promise<HeldPushLock | undefined> {
    const c = await this.pool.connect();
    let pid: number | undefined;
    try {
      if (wait === 'try') {
        const r = await c.query<{ ok: boolean; pid: number }>(
          'select pg_try_advisory_lock($1, $2) as ok, pg_backend_pid() as pid',
          [PUSH_LOCK, repoId],
        );
        if (r.rows[0]?.ok === true) pid = r.rows[0].pid;
      } else {
        // `lock_timeout` bounds the wait; `set local` leaves nothing behind on the session, and a
        // session-level lock outlives the transaction it was taken in
        await c.query('begin');
        try {
          await c.query(`set local lock_timeout = ${Math.max(1, Math.floor(wait))}`);
          const r = await c.query<{ pid: number }>(
            'select pg_advisory_lock($1, $2), pg_backend_pid() as pid',
            [PUSH_LOCK, repoId],
          );
          await c.query('commit');
          pid = r.rows[0]?.pid;
        } catch (e) {
          if ((e as { code?: string }).code !== '55P03') throw e;
          await c.query('rollback');
        }
      }
    } catch (e) {
      c.release(e instanceof Error ? e : true);
      throw e;
    }
    if (pid === undefined) {
      c.release();
      return undefined;
    }
    return held(c, repoId, pid);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** How long an unlock may take before its connection is closed instead. */
const UNLOCK_TIMEOUT_MS = 10_000;

function held(c: pg.PoolClient, repoId: number, pid: number): HeldPushLock {
  let lost = false;
  const onError = () => {
    lost = true;
  };
  c.on('error', onError);
  return {
    pid,
    get lost() {
      return lost;
    },
    async release() {
      let failed: Error | undefined;
      if (!lost) {
        // an unlock that gets no answer (a dead connection) closes the connection instead: the
        // server frees a closed session's locks
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error('the push lock unlock got no answer')),
            UNLOCK_TIMEOUT_MS,
          );
        });
        await Promise.race([c.query('select pg_advisory_unlock($1, $2)', [PUSH_LOCK, repoId]), late])
          .catch((e: unknown) => {
            failed = e instanceof Error ? e : new Error(String(e));
          })
          .finally(() => clearTimeout(timer));
      }
      c.off('error', onError);
      c.release(lost ? true : failed);
    },
  };
}
