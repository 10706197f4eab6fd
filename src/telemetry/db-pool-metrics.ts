import type { Pool } from 'pg';
import type client from 'prom-client';
import type { Orm } from '../db/database.ts';
import type { Metrics } from './metrics.ts';

type PoolStats = Pick<Pool, 'totalCount' | 'idleCount' | 'waitingCount' | 'options'>;

/**
 * The database pools' use on this replica, by pool (`main`: the server's MikroORM pool): connections
 * in use (checked out by a request or a transaction), idle (open, free), callers waiting for a
 * connection, and the pool's maximum. Waiting callers mean the pool (`TRIAD_DB_POOL_MAX`) is too
 * small for the load, or transactions are held too long.
 */
export function observeDbPools(metrics: Metrics, pools: Record<string, () => Promise<PoolStats>>): void {
  const gauge = (name: string, help: string, read: (p: PoolStats) => number): client.Gauge =>
    metrics.labelledGauge(name, help, ['pool'], async (set) => {
      for (const [pool, stats] of Object.entries(pools)) set({ pool }, read(await stats()));
    });
  gauge('triad_db_pool_connections_in_use', 'Database connections checked out of the pool', (p) =>
    Math.max(0, p.totalCount - p.idleCount),
  );
  gauge('triad_db_pool_connections_idle', 'Open database connections free in the pool', (p) => p.idleCount);
  gauge(
    'triad_db_pool_waiting_requests',
    'Callers waiting for a database connection from the pool',
    (p) => p.waitingCount,
  );
  gauge('triad_db_pool_connections_max', 'Connections the pool opens at most', (p) => p.options.max ?? 0);
}

/** The pool of the server's MikroORM connection. */
export function ormPool(orm: Orm): () => Promise<PoolStats> {
  return () => orm.em.getConnection().getNativeClient();
}
