import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { emitEvents } from '../events/outbox.ts';
import { MAX_PUSH_COMMITS, refEvent, type CommitLinks } from '../events/payloads.ts';
import type { RefMove, Snapshot } from '../vcs/driver.ts';
import { Gate } from '../vcs/process/gate.ts';
import type { Vcs, VcsKind } from '../vcs/index.ts';
import * as db from './repository.ts';
import type { SnapshotJson } from './repository.ts';

/** Pushes (to different repositories) holding a database connection at once, per process. */
const MAX_CONCURRENT_PUSHES = 8;

export type ChangedRepo = {
  id: number;
  vcs: VcsKind;
  path: string;
  defaultBranch: string;
  org: string;
  name: string;
};

type Deps = {
  em: () => EntityManager;
  log: Logger;
  baseUrl: () => string;
  /** Where in-flight push markers live (on the repository volume, shared by replicas). */
  markerDir: string;
  vcs: Pick<Vcs, 'driver'>;
  repoById: (id: number) => Promise<ChangedRepo | undefined>;
  /**
   * Called inside the change's transaction (in a savepoint) with the refs that moved: pull
   * requests (source pushes, manual merges) and CI triggers.
   */
  onRefMoves?: (
    tx: EntityManager,
    repo: ChangedRepo,
    moves: RefMove[],
    senderId: number | null,
  ) => Promise<unknown>;
  /** Called after a repository's refs changed (cache invalidation). */
  onChanged?: (repo: ChangedRepo) => void;
};

/** Waiting for the push lock took longer than the request's deadline. */
export class PushLockTimeout extends Error {}

type Marker = { file: string; at: number; base: Snapshot };

/**
 * The one path that changes a repository: the push lock, ref snapshots, the mutation, events, CI
 * triggers and the recorded ref state, in one transaction.
 *
 * Each repository's refs as last recorded live in `repo_ref_states`, written in the same
 * transaction as the push events. Before a mutation runs, a marker file names the repository
 * and its refs at that moment; it is removed once the transaction committed. When the process dies
 * between the mutation and the commit, the marker stays: at the next start (or the next push to
 * that repository, whichever comes first) the refs on disk are compared with the recorded state,
 * and whatever moved gets its events and CI triggers then.
 */
export class RepoChanges {
  private readonly deps: Deps;
  private readonly gate = new Gate(MAX_CONCURRENT_PUSHES);
  private readonly repoGates = new Map<number, Gate>();

  constructor(deps: Deps) {
    this.deps = deps;
  }

  /**
   * Runs `mutate` under the repository's push lock and records what changed (also when `mutate`
   * throws). Pushes to one repository queue in memory, so they hold no database connection
   * while they wait; `signal` ends the wait, `deadline` bounds the wait for the database lock.
   */
  async change<T>(
    repo: ChangedRepo,
    senderId: number | null,
    mutate: () => Promise<T>,
    opts: { signal: AbortSignal; deadline: number },
  ): Promise<T> {
    const out = await this.serialised(repo.id, opts.signal, () =>
      this.locked(repo, senderId, mutate, { wait: opts.deadline }),
    );
    if (out === undefined) throw new PushLockTimeout('push lock not acquired');
    if ('error' in out) throw out.error;
    return out.value;
  }

  /**
   * A push to `repo` is being received (no lock yet): the driver may start what the push's
   * bookkeeping needs meanwhile (see `VcsDriver.prepare`).
   */
  prepare(repo: ChangedRepo): void {
    try {
      this.deps.vcs.driver(repo.vcs).prepare?.(repo.path);
    } catch (err) {
      this.deps.log.warn({ err, repo: repo.id }, 'preparing the push bookkeeping failed');
    }
  }

  /**
   * Reconciles the repositories that have markers left by a process that died mid-push. Called at
   * start; a repository whose lock another live process holds is left to that process.
   */
  async reconcilePending(): Promise<number> {
    const byRepo = new Map<number, string[]>();
    for (const name of await fs.readdir(this.deps.markerDir).catch(() => [] as string[])) {
      const id = Number(/^(\d+)-/.exec(name)?.[1]);
      if (Number.isInteger(id)) byRepo.set(id, [...(byRepo.get(id) ?? []), name]);
    }
    let done = 0;
    for (const [id, names] of byRepo) {
      try {
        const repo = await this.deps.repoById(id);
        if (repo === undefined) {
          for (const n of names) await fs.rm(path.join(this.deps.markerDir, n), { force: true });
          continue;
        }
        const signal = new AbortController().signal;
        const r = await this.serialised(id, signal, () =>
          this.locked(repo, null, undefined, { wait: 'try' }),
        );
        if (r !== undefined) done += 1;
      } catch (err) {
        this.deps.log.error({ err, repo: id }, 'reconciling an interrupted push failed');
      }
    }
    return done;
  }

  private async serialised<R>(id: number, signal: AbortSignal, fn: () => Promise<R>): Promise<R> {
    let g = this.repoGates.get(id);
    if (g === undefined) {
      g = new Gate(1);
      this.repoGates.set(id, g);
    }
    const repoGate = g;
    try {
      const leaveRepo = await repoGate.enter(signal);
      try {
        const leave = await this.gate.enter(signal);
        try {
          return await fn();
        } finally {
          leave();
        }
      } finally {
        leaveRepo();
      }
    } finally {
      if (repoGate.idle()) this.repoGates.delete(id);
    }
  }

  /**
   * One transaction: lock, repair leftovers of interrupted writes, catch up with unrecorded
   * changes, mutate, record. Resolves undefined when the lock was not acquired.
   */
  private async locked<T>(
    repo: ChangedRepo,
    senderId: number | null,
    mutate: (() => Promise<T>) | undefined,
    opts: { wait: number | 'try' },
  ): Promise<{ value: T } | { error: unknown } | undefined> {
    const { log } = this.deps;
    const own = path.join(this.deps.markerDir, `${repo.id}-${randomUUID()}.json`);
    let seen: Marker[] = [];
    let outcome: { value: T } | { error: unknown } | undefined;
    let changed = false;
    const driver = this.deps.vcs.driver(repo.vcs);
    const links: CommitLinks = {
      shortId: driver.constants.shortId,
      commitUrl: (id) => `${this.deps.baseUrl()}/api/v1/repos/${repo.org}/${repo.name}/changeset/${id}`,
    };
    const moveOpts = { defaultBranch: repo.defaultBranch, maxCommits: MAX_PUSH_COMMITS };
    const moves = (from: Snapshot, to: Snapshot) => driver.moves(repo.path, from, to, moveOpts);
    let locked = false;
    try {
      await this.deps
        .em()
        .fork()
        .transactional(async (tx) => {
          if (opts.wait === 'try') {
            if (!(await db.tryPushLock(tx, repo.id))) return;
          } else {
            const ms = Math.max(1000, Math.floor(opts.wait - Date.now()));
            if (!(await db.pushLock(tx, repo.id, ms))) throw new PushLockTimeout('push lock wait timed out');
          }
          locked = true;
          const repaired = await driver.recover(repo.path);
          if (repaired.length > 0)
            log.warn({ repo: repo.id, repaired }, 'repaired leftovers of an interrupted write');
          const before = await driver.snapshot(repo.path);
          seen = await this.markers(repo.id);
          const recorded = (await loadState(tx, repo.id)) ?? seen[0]?.base ?? before;
          const missed = await moves(recorded, before);
          if (missed.length > 0)
            log.warn({ repo: repo.id, events: missed.length }, 'recording unrecorded ref changes');
          await this.record(tx, repo, links, missed, null);
          let final = before;
          if (mutate !== undefined) {
            await fs.mkdir(this.deps.markerDir, { recursive: true });
            await fs.writeFile(own, JSON.stringify({ at: Date.now(), base: toJson(before) }));
            try {
              outcome = { value: await mutate() };
            } catch (error) {
              outcome = { error };
            }
            final = await driver.snapshot(repo.path);
            await this.record(tx, repo, links, await moves(before, final), senderId);
          }
          await db.saveRefState(tx, repo.id, toJson(final));
          changed = JSON.stringify(toJson(recorded)) !== JSON.stringify(toJson(final));
        });
    } catch (e) {
      if (e instanceof PushLockTimeout) return undefined;
      if (outcome === undefined) throw e;
      // The repository changed, but the change is not recorded: the marker stays, so the next
      // push or start records it.
      log.error({ err: e, repo: repo.id }, 'repository changed but its events could not be recorded yet');
      return outcome;
    }
    if (!locked) return undefined;
    for (const m of [...seen.map((x) => x.file), own]) await fs.rm(m, { force: true });
    if (changed) this.deps.onChanged?.(repo);
    return outcome ?? { value: undefined as T };
  }

  /** Markers of a repository's pushes that died before their transaction committed, oldest first. */
  private async markers(repoId: number): Promise<Marker[]> {
    const dir = this.deps.markerDir;
    const out: Marker[] = [];
    for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
      if (!name.startsWith(`${repoId}-`)) continue;
      const file = path.join(dir, name);
      try {
        const m = JSON.parse(await fs.readFile(file, 'utf8')) as { at: number; base: SnapshotJson };
        out.push({ file, at: m.at, base: fromJson(m.base) });
      } catch {
        await fs.rm(file, { force: true }); // unreadable (written half when the process died)
      }
    }
    return out.sort((a, b) => a.at - b.at);
  }

  /** Outbox rows and CI triggers for ref moves; a CI trigger failure keeps the events. */
  private async record(
    tx: EntityManager,
    repo: ChangedRepo,
    links: CommitLinks,
    moves: RefMove[],
    senderId: number | null,
  ) {
    if (moves.length === 0) return;
    const repoId = repo.id;
    await emitEvents(
      tx,
      moves.map((m) => refEvent(m, links, repoId, senderId)),
    );
    const trigger = this.deps.onRefMoves;
    if (trigger === undefined) return;
    try {
      await tx.transactional((sp) => trigger(sp, repo, moves, senderId));
    } catch (err) {
      this.deps.log.error({ err, repo: repoId }, 'CI triggers failed; push events kept');
    }
  }
}

// ---------------------------------------------------------------- recorded ref state

function toJson(s: Snapshot): SnapshotJson {
  const sorted = (m: Map<string, string>) => [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    tip: s.tip,
    branches: sorted(s.branches),
    bookmarks: sorted(s.bookmarks),
    tags: sorted(s.tags),
    mark: s.mark,
  };
}

function fromJson(j: SnapshotJson): Snapshot {
  return {
    tip: j.tip,
    branches: new Map(j.branches),
    bookmarks: new Map(j.bookmarks),
    tags: new Map(j.tags),
    mark: j.mark,
  };
}

async function loadState(tx: EntityManager, repoId: number): Promise<Snapshot | undefined> {
  const state = await db.refState(tx, repoId);
  return state === undefined ? undefined : fromJson(state);
}
