/**
 * The VCS layer of a server (`createVcs`): the driver of each kind (driver.ts documents the
 * contract; one folder per kind), their operations (ops.ts) and the pooled readers (reader.ts),
 * all keeping their persistent processes in the server's one `ProcessPool`. How processes are
 * started and kept is in `process/`. Also where a repository is stored.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { VcsKind } from './constants.ts';
import type { VcsDriver } from './driver.ts';
import { fossilDriver } from './fossil/driver.ts';
import { gitDriver } from './git/driver.ts';
import { createHgDriver } from './hg/driver.ts';
import type { VcsOps } from './ops.ts';
import type { PoolGroup, ProcessPool } from './process/pool.ts';
import { closeSpawner } from './process/spawner.ts';
import type { RepoReader } from './reader.ts';

export { VCS_KINDS, type VcsKind } from './constants.ts';
export type { VcsDriver } from './driver.ts';
export type { ArchiveFormat } from './process/stream.ts';

/** Storage is keyed by the repository id, so renames and org renames never move files. */
export function repoPath(root: string, id: number, vcs: VcsKind): string {
  return path.join(root, `${id}.${vcs}`);
}

export async function removeRepository(dest: string): Promise<void> {
  await fs.rm(dest, { recursive: true, force: true });
}

/** The contents readers: at most 64 repositories' (one persistent process each). */
const READERS: PoolGroup = { name: 'reader', max: 64, idleMs: 60_000 };

/** The VCS side of one server. */
export type Vcs = {
  driver(kind: VcsKind): VcsDriver;
  ops(kind: VcsKind): VcsOps;
  /** The pooled reader of a repository (its process starts on the first read). */
  reader(kind: VcsKind, dir: string): RepoReader;
  /** Removes a repository's storage (nothing happens when there is none). */
  remove(dir: string): Promise<void>;
  /** Forgets a repository's pooled processes and caches (after a push, a change). */
  invalidate(dir: string): void;
  /** Ends the pooled processes (on their closed input); later calls start new ones. */
  closeProcesses(): void;
  /**
   * At shutdown: `closeProcesses`, then ends this process's spawner, which starts every process,
   * once the processes already asked to end (also the WSGI workers) have exited, at most
   * `graceMs` later.
   */
  close(graceMs: number): Promise<void>;
};

/**
 * The drivers and operations of every kind over `pool` (made once per server, also given to the
 * transports' WSGI workers). `timeoutMs`: the operations' time limit of one VCS command.
 */
export function createVcs(opts: { pool: ProcessPool; tmpDir: string; timeoutMs?: number }): Vcs {
  const { pool } = opts;
  const drivers: Record<VcsKind, VcsDriver> = {
    git: gitDriver,
    hg: createHgDriver(pool),
    fossil: fossilDriver,
  };
  const reader = (kind: VcsKind, dir: string) => pool.get(READERS, dir, () => drivers[kind].openReader(dir));
  const opsOf = (kind: VcsKind) =>
    drivers[kind].createOps({
      tmpDir: opts.tmpDir,
      timeoutMs: opts.timeoutMs ?? 60_000,
      reader: (dir) => reader(kind, dir),
    });
  const ops: Record<VcsKind, VcsOps> = { git: opsOf('git'), hg: opsOf('hg'), fossil: opsOf('fossil') };
  return {
    driver: (kind) => drivers[kind],
    ops: (kind) => ops[kind],
    reader,
    remove: (dir) => removeRepository(dir),
    invalidate: (dir) => pool.invalidate(dir),
    closeProcesses: () => pool.close(),
    close: async (graceMs) => {
      pool.close();
      await closeSpawner(graceMs);
    },
  };
}
