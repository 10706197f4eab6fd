import pg from 'pg';
import { MikroORM } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import { migrations } from './migrations/index.ts';
import { entities } from './entities.ts';
import { plainStatementsOnly } from './query.ts';

export type Orm = MikroORM;

/** Any lock id works as long as every Triad process uses the same one. */
const MIGRATION_LOCK_ID = 0x7472_6961; // "tria"

export { freePort } from './ports.ts';
export { startEmbeddedPostgres, type EmbeddedDb } from './embedded.ts';

/**
 * The ORM on `url`, with at most `poolMax` connections; `prepared: false` when `url` goes through
 * a transaction-mode pooler (no named prepared statements then).
 */
export async function openOrm(
  url: string,
  opts: { poolMax?: number; prepared?: boolean } = {},
): Promise<Orm> {
  const orm = await MikroORM.init({
    clientUrl: url,
    entities,
    discovery: { warnWhenNoEntities: false },
    extensions: [Migrator],
    migrations: { migrationsList: migrations, tableName: 'triad_migrations', silent: true, snapshot: false },
    pool: { min: 0, max: opts.poolMax ?? 20 },
    allowGlobalContext: false,
    debug: false,
  });
  if (opts.prepared === false) plainStatementsOnly(orm.config);
  return orm;
}

/** Resolves once the database answers a trivial query on a pool connection (readiness). */
export async function ping(orm: Orm): Promise<void> {
  await orm.em.fork().execute('select 1');
}

/**
 * Applies pending migrations while holding a PostgreSQL advisory lock, so several servers
 * starting at once against one database migrate it exactly once and all come up. `url` is where
 * the lock is taken: a session of its own, so never through a transaction-mode pooler
 * (DATABASE_DIRECT_URL then).
 */
export async function migrate(url: string, orm: Orm): Promise<string[]> {
  const lockClient = new pg.Client({ connectionString: url });
  await lockClient.connect();
  try {
    await lockClient.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    const applied = await orm.migrator.up();
    return applied.map((m) => m.name);
  } finally {
    await lockClient.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => undefined);
    await lockClient.end();
  }
}
