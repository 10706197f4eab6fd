import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { embeddedUrl, passwordFile, startEmbeddedPostgres, type EmbeddedDb } from '../../src/db/embedded.ts';
import { readPostmasterPid } from '../../src/db/processes.ts';
import { createLogger } from '../../src/telemetry/logger.ts';

const log = createLogger('silent');
const dirs: string[] = [];
const clusters = new Set<EmbeddedDb>();

afterAll(async () => {
  await Promise.all([...clusters].map((c) => c.stop()));
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

/** Like `mktemp -d`: a fresh directory of mode 0700 owned by whoever runs the tests. */
async function privateDir(): Promise<string> {
  const d = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-embedded-'));
  dirs.push(d);
  expect((await fs.stat(d)).mode & 0o777).toBe(0o700);
  return d;
}

async function query(url: string, sql: string): Promise<unknown[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql)).rows;
  } finally {
    await c.end();
  }
}

async function start(dir: string, identity?: 'system-user'): Promise<EmbeddedDb> {
  const db = await startEmbeddedPostgres(dir, log, identity === undefined ? {} : { identity });
  clusters.add(db);
  return db;
}

async function stop(db: EmbeddedDb): Promise<void> {
  await db.stop();
  clusters.delete(db);
}

/** Field 6 of /proc/PID/stat: the session id. */
async function sessionOf(pid: number): Promise<number> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
}

describe('embedded PostgreSQL runner', () => {
  test('when the cluster lives below a 0700 directory, then it is created, starts, answers select 1, and runs in its own session', async () => {
    const clusterDir = path.join(await privateDir(), 'data', 'pg');
    const db = await start(clusterDir);
    expect(await query(db.url, 'select 1 as one')).toEqual([{ one: 1 }]);
    expect(await query(db.url, 'show data_directory')).toEqual([{ data_directory: clusterDir }]);
    // Its own session: a terminal's Ctrl-C to Triad's process group does not reach it.
    expect(await sessionOf(db.pid)).toBe(db.pid);
    expect(await sessionOf(db.pid)).not.toBe(await sessionOf(process.pid));
    // Files stay owned by the user running Triad (as root: root, through the user namespace).
    expect((await fs.stat(path.join(clusterDir, 'PG_VERSION'))).uid).toBe(process.getuid!());
    await stop(db);
    expect(await readPostmasterPid(clusterDir)).toBeUndefined();
  }, 60_000);

  test('when started, then the superuser password is a random secret in a 0600 file, not "triad", and only that password logs in', async () => {
    const clusterDir = path.join(await privateDir(), 'pg');
    const db = await start(clusterDir);
    const file = passwordFile(clusterDir);
    const st = await fs.stat(file);
    expect(st.mode & 0o777).toBe(0o600);
    const password = (await fs.readFile(file, 'utf8')).trim();
    expect(password).not.toBe('triad');
    expect(password).toMatch(/^[0-9a-f]{48}$/);
    expect(db.url).toBe(embeddedUrl(db.port, password));
    await expect(query(embeddedUrl(db.port, 'triad', 'postgres'), 'select 1')).rejects.toThrow(
      /password authentication failed/,
    );

    // A cluster without the file (one from a version with a fixed password): a new password is set.
    await stop(db);
    await fs.rm(file);
    const again = await start(clusterDir);
    const next = (await fs.readFile(file, 'utf8')).trim();
    expect(next).toMatch(/^[0-9a-f]{48}$/);
    expect(next).not.toBe(password);
    expect(await query(again.url, 'select 2 as two')).toEqual([{ two: 2 }]);
    await expect(query(embeddedUrl(again.port, password, 'postgres'), 'select 1')).rejects.toThrow(
      /password authentication failed/,
    );
    // The same password on a plain restart.
    await stop(again);
    const third = await start(clusterDir);
    expect(third.url).toBe(embeddedUrl(third.port, next));
    await stop(third);
  }, 60_000);

  test('when run as root without a user namespace, then the postgres system user is used where it can reach the directory, and a clear error names the blocking directory where it cannot', async () => {
    if (process.getuid?.() !== 0) {
      // Not root: PostgreSQL simply runs as this user; there is no fallback to check.
      await expect(start(path.join(await privateDir(), 'pg'), 'system-user')).resolves.toBeDefined();
      return;
    }
    const blocked = await privateDir();
    const clusterDir = path.join(blocked, 'data', 'pg');
    await expect(start(clusterDir, 'system-user')).rejects.toThrow(
      new RegExp(`cannot enter ${blocked} \\(mode 700\\).*TRIAD_DATA_DIR`),
    );
    expect(await fs.stat(path.join(clusterDir, 'PG_VERSION')).catch(() => undefined)).toBeUndefined();

    const open = await privateDir();
    await fs.chmod(open, 0o755);
    const reachable = path.join(open, 'pg');
    const db = await start(reachable, 'system-user');
    expect(await query(db.url, 'select 3 as three')).toEqual([{ three: 3 }]);
    const pgUid = (await fs.stat(path.join(reachable, 'PG_VERSION'))).uid;
    expect(pgUid).not.toBe(0);
    // The password file is Triad's (root's), not readable by the postgres user.
    expect((await fs.stat(passwordFile(reachable))).uid).toBe(0);
    await stop(db);
    // The same cluster later run through the user namespace is handed back to root.
    const back = await start(reachable);
    expect((await fs.stat(path.join(reachable, 'PG_VERSION'))).uid).toBe(0);
    expect(await query(back.url, 'select 4 as four')).toEqual([{ four: 4 }]);
    await stop(back);
  }, 90_000);
});
