/**
 * The VCS drivers by kind (driver.ts documents the contract) and what the rest of the server
 * needs beyond them: where a repository is stored, the operations set of a server.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { VcsKind } from './constants.ts';
import type { VcsDriver } from './driver.ts';
import { fossilDriver } from './fossil/driver.ts';
import { gitDriver } from './git/driver.ts';
import { hgDriver } from './hg/driver.ts';
import { closeBookkeeping } from './hg/refs.ts';
import type { OpsOptions, VcsOps } from './ops.ts';
import { ReaderPool } from './process/pool.ts';
import { closeSpawner } from './process/spawner.ts';
import type { RepoReader } from './reader.ts';

export { VCS_KINDS, type VcsKind } from './constants.ts';
export type { VcsDriver } from './driver.ts';
export type { ArchiveFormat } from './process/stream.ts';

const DRIVERS: Record<VcsKind, VcsDriver> = { git: gitDriver, hg: hgDriver, fossil: fossilDriver };

export function driverFor(kind: VcsKind): VcsDriver {
  return DRIVERS[kind];
}

/** Storage is keyed by the repository id, so renames and org renames never move files. */
export function repoPath(root: string, id: number, vcs: VcsKind): string {
  return path.join(root, `${id}.${vcs}`);
}

export async function removeRepository(dest: string): Promise<void> {
  await fs.rm(dest, { recursive: true, force: true });
}

/**
 * Ends the processes the drivers keep between calls (Mercurial's bookkeeping command servers) and
 * the spawner that starts every process, once the processes already asked to end (closed readers,
 * command servers, workers) have exited, at most `graceMs` later.
 */
export async function closeDriverProcesses(graceMs: number): Promise<void> {
  closeBookkeeping();
  await closeSpawner(graceMs);
}

/** A reader for one repository (the `ReaderPool`'s factory). */
export function openReader(vcs: VcsKind, dir: string): RepoReader {
  return DRIVERS[vcs].openReader(dir);
}

/**
 * The operations of every kind, sharing options (one set per server); `close` ends all persistent
 * processes it owns (a reader pool it was given stays open: its owner closes it).
 */
export class VcsOpsSet {
  private readonly byKind: Record<VcsKind, VcsOps>;
  private readonly ownReaders: ReaderPool | undefined;

  constructor(opts: OpsOptions) {
    const readers = opts.readers ?? new ReaderPool(openReader);
    this.ownReaders = opts.readers === undefined ? readers : undefined;
    const o = { tmpDir: opts.tmpDir, timeoutMs: opts.timeoutMs ?? 60_000, readers };
    this.byKind = {
      git: gitDriver.createOps(o),
      hg: hgDriver.createOps(o),
      fossil: fossilDriver.createOps(o),
    };
  }

  get(kind: VcsKind): VcsOps {
    return this.byKind[kind];
  }

  close(): void {
    for (const ops of Object.values(this.byKind)) ops.close();
    this.ownReaders?.close();
  }
}
