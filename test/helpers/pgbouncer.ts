import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../src/db/database.ts';
import { exited } from './process.ts';
import { waitFor } from './wait.ts';

/** Debian's package `pgbouncer` (.ci/run installs it). */
export const PGBOUNCER = '/usr/sbin/pgbouncer';

export type PgBouncer = {
  port: number;
  /** The URL of database `db` through PgBouncer. */
  url: (db: string) => string;
  /** What PgBouncer logged so far. */
  log: () => string;
  /** Stops PgBouncer and removes its directory. */
  stop: () => Promise<void>;
};

/**
 * Starts a real PgBouncer on a free loopback port in front of the PostgreSQL of `pgUrl` (any
 * database name is passed through), with `pool_mode` and at most `poolSize` server connections
 * per database. Clients log in without a password (`auth_type = any`, loopback only); PgBouncer
 * logs in to PostgreSQL with the credentials of `pgUrl`. As root it runs as `nobody` (it refuses
 * root), so its directory is readable by others: test credentials only.
 */
export async function startPgBouncer(
  pgUrl: string,
  opts: { poolMode: 'transaction' | 'session'; poolSize: number },
): Promise<PgBouncer> {
  const pg = new URL(pgUrl);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-pgbouncer-'));
  const port = await freePort();
  const ini = path.join(dir, 'pgbouncer.ini');
  const server = [
    `host=${pg.hostname}`,
    `port=${pg.port}`,
    `user=${decodeURIComponent(pg.username)}`,
    `password=${decodeURIComponent(pg.password)}`,
  ].join(' ');
  await fs.writeFile(
    ini,
    [
      '[databases]',
      `* = ${server}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      `pool_mode = ${opts.poolMode}`,
      `default_pool_size = ${opts.poolSize}`,
      'max_client_conn = 500',
      'ignore_startup_parameters = extra_float_digits',
      'log_connections = 1',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  await fs.chmod(dir, 0o755);
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'nobody'] : []), ini], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (out += b.toString()));
  const gone = exited(child);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await gone;
    await fs.rm(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      'PgBouncer to listen',
      () => {
        if (child.exitCode !== null) throw new Error(`pgbouncer exited ${child.exitCode}: ${out}`);
        return out.includes('process up') ? true : undefined;
      },
      15_000,
      50,
    );
  } catch (e) {
    await stop();
    throw e;
  }
  const user = encodeURIComponent(decodeURIComponent(pg.username));
  return {
    port,
    url: (db) => `postgres://${user}@127.0.0.1:${port}/${db}`,
    log: () => out,
    stop,
  };
}
