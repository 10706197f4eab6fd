import { readFileSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { clusterPassword, embeddedUrl, startEmbeddedPostgres, type EmbeddedDb } from './embedded.ts';
import {
  parentPid,
  processAlive,
  processProgram,
  processStartTime,
  readPostmasterPid,
  waitGone,
} from './processes.ts';

/**
 * One Triad process at a time owns a data directory's embedded PostgreSQL. It says so in
 * `TRIAD_DATA_DIR/triad.pid` (JSON: pid, command, start time), created exclusively and removed
 * when it stops. A lock whose process is gone is stale: it is replaced, and a PostgreSQL that
 * process left running is stopped before the cluster is started again.
 */
export type LockOwner = { pid: number; command: string; started: string; proc_start?: string };

export class DataDirInUse extends Error {
  readonly owner: LockOwner;
  readonly postgresPid: number | undefined;
  constructor(dataDir: string, owner: LockOwner, postgresPid: number | undefined) {
    super(
      `the data directory ${dataDir} is in use by Triad process ${owner.pid} (\`triad ${owner.command}\`, ` +
        `started ${owner.started})${postgresPid === undefined ? '' : ` with its PostgreSQL process ${postgresPid}`}` +
        `; stop that process first (or use another TRIAD_DATA_DIR). Lock file: ${lockFile(dataDir)}`,
    );
    this.owner = owner;
    this.postgresPid = postgresPid;
  }
}

export function lockFile(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'triad.pid');
}

export function clusterDir(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'pg');
}

async function readOwner(file: string): Promise<LockOwner | undefined> {
  const text = await fs.readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    const o = JSON.parse(text) as Partial<LockOwner>;
    if (typeof o.pid !== 'number') return undefined;
    return {
      pid: o.pid,
      command: String(o.command ?? '?'),
      started: String(o.started ?? '?'),
      ...(o.proc_start === undefined ? {} : { proc_start: String(o.proc_start) }),
    };
  } catch {
    return undefined;
  }
}

/** The same process as recorded (pid alive and, where /proc tells, the same start time). */
async function ownerAlive(o: LockOwner): Promise<boolean> {
  if (!processAlive(o.pid)) return false;
  if (o.proc_start === undefined) return true;
  const now = await processStartTime(o.pid);
  return now === undefined || now === o.proc_start;
}

export type DataDirLock = { release: () => Promise<void> };

/**
 * Takes the data directory for this process, or throws `DataDirInUse` naming its owner. Clears
 * what a crashed owner left: its lock file and its still-running PostgreSQL.
 */
export async function lockDataDir(dataDir: string, command: string, log: Logger): Promise<DataDirLock> {
  const file = lockFile(dataDir);
  await fs.mkdir(path.dirname(file), { recursive: true });
  const procStart = await processStartTime(process.pid);
  const me: LockOwner = {
    pid: process.pid,
    command,
    started: new Date().toISOString(),
    ...(procStart === undefined ? {} : { proc_start: procStart }),
  };
  let staleOwner: LockOwner | undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      await fs.writeFile(file, `${JSON.stringify(me)}\n`, { flag: 'wx', mode: 0o644 });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw e;
    }
    const owner = await readOwner(file);
    if (owner !== undefined && (await ownerAlive(owner))) {
      const pm = await readPostmasterPid(clusterDir(dataDir));
      throw new DataDirInUse(
        path.resolve(dataDir),
        owner,
        pm !== undefined && processAlive(pm.pid) ? pm.pid : undefined,
      );
    }
    staleOwner = owner;
    log.warn({ file, pid: owner?.pid }, 'removing the lock of a Triad process that is gone');
    await fs.rm(file, { force: true });
  }
  // A process that exits without releasing (a deadline, an uncaught error) still removes it.
  const onExit = () => {
    try {
      if ((JSON.parse(readFileSync(file, 'utf8')) as LockOwner).pid === process.pid)
        rmSync(file, { force: true });
    } catch {
      // already gone or unreadable: nothing of ours to remove
    }
  };
  process.once('exit', onExit);
  const release = async () => {
    process.removeListener('exit', onExit);
    const o = await readOwner(file);
    if (o?.pid === process.pid) await fs.rm(file, { force: true });
  };
  try {
    await clearPostmaster(dataDir, staleOwner !== undefined, log);
  } catch (e) {
    await release();
    throw e;
  }
  return { release };
}

/** Deals with a postmaster.pid whose process is alive although no live Triad owns the directory. */
async function clearPostmaster(dataDir: string, ownerCrashed: boolean, log: Logger): Promise<void> {
  const dir = clusterDir(dataDir);
  const pm = await readPostmasterPid(dir);
  if (pm === undefined || !processAlive(pm.pid)) return; // PostgreSQL removes a dead one itself
  if ((await processProgram(pm.pid)) !== 'postgres') {
    // The pid was reused by an unrelated process; PostgreSQL would refuse to start.
    await fs.rm(path.join(dir, 'postmaster.pid'), { force: true });
    return;
  }
  const ppid = await parentPid(pm.pid);
  if (!ownerCrashed && ppid !== undefined && ppid !== 1 && processAlive(ppid)) {
    // No lock, but a live parent: an older Triad (which wrote no lock) or something else runs it.
    throw new Error(
      `the PostgreSQL cluster ${dir} is already running (process ${pm.pid}, port ${pm.port}) under process ` +
        `${ppid}; stop that process first (or use another TRIAD_DATA_DIR)`,
    );
  }
  log.warn({ pid: pm.pid, dir }, 'stopping the PostgreSQL left running by a Triad process that is gone');
  for (const [signal, ms] of [
    ['SIGINT', 10_000],
    ['SIGQUIT', 3_000],
    ['SIGKILL', 3_000],
  ] as const) {
    try {
      process.kill(pm.pid, signal);
    } catch {
      return;
    }
    if (await waitGone(pm.pid, ms)) return;
  }
  throw new Error(`the PostgreSQL process ${pm.pid} of ${dir} does not stop`);
}

export type OwnedDatabase = {
  url: string;
  /** Our own cluster (stopped by `close`), or undefined when attached to another process's. */
  embedded: EmbeddedDb | undefined;
  /** Stops our cluster (if any) and releases the lock; `timeoutMs` bounds the fast shutdown. */
  close: (timeoutMs?: number) => Promise<void>;
};

/** Locks the data directory and starts its cluster: what `triad serve` does. */
export async function ownEmbeddedDatabase(
  dataDir: string,
  command: string,
  log: Logger,
): Promise<OwnedDatabase> {
  const lock = await lockDataDir(dataDir, command, log);
  let embedded: EmbeddedDb;
  try {
    embedded = await startEmbeddedPostgres(clusterDir(dataDir), log);
  } catch (e) {
    await lock.release();
    throw e;
  }
  return {
    url: embedded.url,
    embedded,
    close: async (timeoutMs) => {
      try {
        await embedded.stop(timeoutMs);
      } finally {
        await lock.release();
      }
    },
  };
}

/**
 * For CLI commands: the running server's cluster when a live Triad owns the data directory
 * (port from its postmaster.pid, password from the password file), else a cluster of our own.
 */
export async function embeddedDatabaseForCli(
  dataDir: string,
  command: string,
  log: Logger,
): Promise<OwnedDatabase> {
  try {
    return await ownEmbeddedDatabase(dataDir, command, log);
  } catch (e) {
    if (!(e instanceof DataDirInUse)) throw e;
    const pm = await readPostmasterPid(clusterDir(dataDir));
    if (pm === undefined || !processAlive(pm.pid) || pm.status !== 'ready') throw e;
    const password = await clusterPassword(clusterDir(dataDir));
    log.debug({ pid: e.owner.pid, port: pm.port }, 'using the PostgreSQL of the running Triad process');
    return { url: embeddedUrl(pm.port, password), embedded: undefined, close: () => Promise.resolve() };
  }
}
