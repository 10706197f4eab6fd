import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Db } from '../db/query.ts';
import type { RepoHandle } from '../domain/repo.ts';
import { emitEvents } from '../events/outbox.ts';
import { MAX_PUSH_COMMITS, refEvent, type CommitLinks } from '../events/payloads.ts';
import type { Trigger } from '../pipelines/model.ts';
import type { HeadMove, RefMove, Snapshot } from '../vcs/driver.ts';
import { headMoves } from '../vcs/refs.ts';
import { Gate } from '../vcs/process/gate.ts';
import * as db from './repository.ts';
import type { TransportMetrics } from '../telemetry/transport-metrics.ts';
import { PushLocks } from './push-locks.ts';
import { inSpan } from '../telemetry/spans.ts';
import { fromJson, loadState, toJson } from './ref-state.ts';
import type { SnapshotJson } from './repository.ts';
import type { ReposService } from './service.ts';

/** Pushes (to different repositories) holding a push lock connection at once, per process. */
const MAX_CONCURRENT_PUSHES = 8;

/** Why a change happened, when it is more than a client's push: a pull request's merge. */
export type ChangeCause = {
  kind: 'pull_merge';
  pullId: number;
  actorId: number;
  /** The source and target heads the merge started from. */
  head: string;
  base: string;
};

/** What a listener receives for the refs one change moved. */
export type ChangeContext = {
  /** The change's transaction (a savepoint of it: a failing listener undoes only its own writes). */
  tx: Db;
  repo: RepoHandle;
  /** The repository's refs before the change. */
  before: Snapshot;
  /** What the change's push events report: branches, bookmarks and tags that moved or appeared. */
  moves: readonly RefMove[];
  /**
   * The refs a pull request may name whose head moved (`VcsDriver.refHeads` before and after):
   * for Mercurial also named branches and `@` standing for the default one, which a move of
   * another bookmark may carry along without a move of their own.
   */
  heads: ReadonlyMap<string, HeadMove>;
  senderId: number | null;
  cause: ChangeCause | undefined;
  /**
   * CI triggers beyond the moves themselves, added by the `pulls` phase (a pull request's new
   * source head) for the `ci` phase, so a commit reached by a push and a pull request gets one pipeline.
   */
  triggers: Trigger[];
};

/**
 * What runs after a change, in the order of `PHASES`: `revs` (the recorded commit sequence),
 * `pulls` and `ci` inside the change's transaction (each in a savepoint; a failure is logged and
 * the change and its events are kept), `committed` once the transaction committed and the refs
 * changed (cache invalidation).
 */
export type ChangeListener =
  | { phase: 'revs' | 'pulls' | 'ci'; onMoves(ctx: ChangeContext): Promise<void> }
  | { phase: 'committed'; onCommitted(repo: RepoHandle): void };
export const PHASES = [
  'revs',
  'pulls',
  'ci',
  'committed',
] as const satisfies readonly ChangeListener['phase'][];

type Deps = {
  em: () => EntityManager;
  log: Logger;
  baseUrl: () => string;
  /** Where in-flight push markers live (on the repository volume, shared by replicas). */
  markerDir: string;
  /** The repositories a start-up reconciliation finds by id. */
  repos: Pick<ReposService, 'findHandle'>;
  /** Where the push locks' sessions connect (DATABASE_DIRECT_URL when set). */
  lockUrl: string;
  /** The push-lock wait histogram and timeout counter. */
  metrics?: Pick<TransportMetrics, 'lockWaited' | 'lockTimedOut'>;
};

/** Waiting for the push lock took longer than the request's deadline. */
export class PushLockTimeout extends Error {}

type Marker = { file: string; at: number; base: Snapshot };

/**
 * The one path that changes a repository: the push lock, ref snapshots, the mutation, events, the
 * listeners (pull requests, CI) and the recorded ref state. The lock is a session lock held on a
 * connection of its own for the whole change; the database writes are short transactions before
 * and after the mutation, none open while it runs.
 *
 * Each repository's refs as last recorded live in `repo_ref_states`, written in the same
 * transaction as the push events. Before a mutation runs, a marker file names the repository
 * and its refs at that moment; it is removed once the change is recorded. When the process dies
 * between the mutation and the recording, the marker stays: at the next start (or the next push to
 * that repository, whichever comes first) the refs on disk are compared with the recorded state,
 * and whatever moved gets its events and CI triggers then.
 */
export class RepoChanges {
  private readonly deps: Deps;
  private readonly gate = new Gate(MAX_CONCURRENT_PUSHES);
  private readonly repoGates = new Map<number, Gate>();
  private readonly locks: PushLocks;
  private listeners: ChangeListener[] = [];

  constructor(deps: Deps) {
    this.deps = deps;
    this.locks = new PushLocks(deps.lockUrl, MAX_CONCURRENT_PUSHES);
  }

  /** Closes the push locks' connections (at shutdown, once no change runs). */
  async close(): Promise<void> {
    await this.locks.close();
  }

  /** Adds listeners; they run in the order of their phase (`PHASES`), whatever the order added. */
  listen(...listeners: ChangeListener[]): void {
    this.listeners = [...this.listeners, ...listeners].sort(
      (a, b) => PHASES.indexOf(a.phase) - PHASES.indexOf(b.phase),
    );
  }

  /**
   * Runs `mutate` under the repository's push lock and records what changed (also when `mutate`
   * throws). Pushes to one repository queue in memory, so they hold no database connection
   * while they wait; `signal` ends the wait, `deadline` bounds the wait for the database lock.
   * `mutate` may name the change's cause (`because`), which the listeners receive with its moves.
   */
  async change<T>(
    repo: RepoHandle,
    senderId: number | null,
    mutate: (because: (cause: ChangeCause) => void) => Promise<T>,
    opts: { signal: AbortSignal; deadline: number },
  ): Promise<T> {
    const since = performance.now(); // the push-lock wait: the queue in memory, then the database lock
    const attributes = { 'repo.id': repo.id, 'vcs.kind': repo.driver.kind };
    const out = await inSpan('repo.change', { attributes }, () =>
      this.serialised(repo.id, opts.signal, () =>
        this.locked(repo, senderId, mutate, { wait: opts.deadline, since }),
      ),
    );
    if (out === undefined) {
      this.deps.metrics?.lockTimedOut(repo.driver.kind);
      throw new PushLockTimeout('push lock not acquired');
    }
    if ('error' in out) throw out.error;
    return out.value;
  }

  /**
   * A push to `repo` is being received (no lock yet): the driver may start what the push's
   * bookkeeping needs meanwhile (see `VcsDriver.prepare`).
   */
  prepare(repo: RepoHandle): void {
    try {
      repo.driver.prepare?.(repo.path);
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
        const repo = await this.deps.repos.findHandle(id);
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
      // (spans: the wait behind this process's other pushes to the repository, then for a slot)
      const attributes = { 'repo.id': id };
      const leaveRepo = await inSpan('push.lock.queue', { attributes }, () => repoGate.enter(signal));
      try {
        const leave = await inSpan('push.slot', { attributes }, () => this.gate.enter(signal));
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
   * Under the push lock (a session lock on a connection of its own, push-locks.ts): repair
   * leftovers of interrupted writes, catch up with unrecorded changes (a short transaction),
   * mutate (no transaction open), record (a second short transaction, only while the lock is
   * still held). Resolves undefined when the lock was not acquired.
   */
  private async locked<T>(
    repo: RepoHandle,
    senderId: number | null,
    mutate: ((because: (cause: ChangeCause) => void) => Promise<T>) | undefined,
    opts: { wait: number | 'try'; since?: number },
  ): Promise<{ value: T } | { error: unknown } | undefined> {
    const { log } = this.deps;
    const wait = opts.wait === 'try' ? 'try' : Math.max(1000, Math.floor(opts.wait - Date.now()));
    // (span: the wait for the repository's lock, held by a push of any replica)
    const lock = await inSpan('push.lock', { attributes: { 'repo.id': repo.id } }, () =>
      this.locks.acquire(repo.id, wait),
    );
    if (lock === undefined) return undefined;
    if (opts.since !== undefined)
      this.deps.metrics?.lockWaited(repo.driver.kind, (performance.now() - opts.since) / 1000);
    const own = path.join(this.deps.markerDir, `${repo.id}-${randomUUID()}.json`);
    let outcome: { value: T } | { error: unknown } | undefined;
    let cause: ChangeCause | undefined;
    const driver = repo.driver;
    const links: CommitLinks = {
      shortId: driver.constants.shortId,
      commitUrl: (id) => `${this.deps.baseUrl()}/api/v1/repos/${repo.org}/${repo.name}/changeset/${id}`,
    };
    const moveOpts = { defaultBranch: repo.defaultBranch, maxCommits: MAX_PUSH_COMMITS };
    const moves = (from: Snapshot, to: Snapshot) => driver.moves(repo.path, from, to, moveOpts);
    /** Records one change and the ref state after it, in a transaction, while the lock holds. */
    const commit = (from: Snapshot, to: Snapshot, found: RefMove[], sender: number | null) =>
      this.deps
        .em()
        .fork()
        .transactional(async (tx) => {
          if (lock.lost || !(await db.pushLockHeld(tx, repo.id, lock.pid)))
            throw new Error('the push lock was lost (its database connection failed)');
          await this.record(tx, repo, links, { before: from, after: to, moves: found }, sender, cause);
          await db.saveRefState(tx, repo.id, toJson(to));
        });
    try {
      let seen: Marker[] = [];
      let recorded: Snapshot;
      let final: Snapshot;
      try {
        const repaired = await driver.recover(repo.path);
        if (repaired.length > 0)
          log.warn({ repo: repo.id, repaired }, 'repaired leftovers of an interrupted write');
        const before = await driver.snapshot(repo.path);
        seen = await this.markers(repo.id);
        recorded = (await loadState(this.deps.em().fork(), repo.id)) ?? seen[0]?.base ?? before;
        const missed = await moves(recorded, before);
        if (missed.length > 0)
          log.warn({ repo: repo.id, events: missed.length }, 'recording unrecorded ref changes');
        if (missed.length > 0 || mutate === undefined) await commit(recorded, before, missed, null);
        final = before;
        if (mutate !== undefined) {
          await fs.mkdir(this.deps.markerDir, { recursive: true });
          await fs.writeFile(own, JSON.stringify({ at: Date.now(), base: toJson(before) }));
          try {
            outcome = {
              value: await mutate((c) => {
                cause = c;
              }),
            };
          } catch (error) {
            outcome = { error };
          }
          final = await driver.snapshot(repo.path);
          await commit(before, final, await moves(before, final), senderId);
        }
      } catch (e) {
        if (outcome === undefined) throw e;
        // The repository changed, but the change is not recorded: the marker stays, so the next
        // push or start records it.
        log.error({ err: e, repo: repo.id }, 'repository changed but its events could not be recorded yet');
        return outcome;
      }
      for (const m of [...seen.map((x) => x.file), own]) await fs.rm(m, { force: true });
      if (JSON.stringify(toJson(recorded)) !== JSON.stringify(toJson(final))) this.committed(repo);
      return outcome ?? { value: undefined as T };
    } finally {
      await lock.release();
    }
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

  /**
   * Outbox rows for the ref moves from one snapshot to another, then the in-transaction
   * listeners; a listener's failure keeps the events.
   */
  private async record(
    tx: EntityManager,
    repo: RepoHandle,
    links: CommitLinks,
    { before, after, moves }: { before: Snapshot; after: Snapshot; moves: RefMove[] },
    senderId: number | null,
    cause: ChangeCause | undefined,
  ) {
    if (moves.length === 0) return;
    await emitEvents(
      tx,
      moves.map((m) => refEvent(m, links, repo.id, senderId)),
    );
    const ctx: Omit<ChangeContext, 'tx'> = {
      repo,
      before,
      moves,
      heads: headMoves(repo.driver, before, after),
      senderId,
      cause,
      triggers: [],
    };
    for (const l of this.listeners) {
      if (l.phase === 'committed') continue;
      try {
        await tx.transactional((sp) => l.onMoves({ ...ctx, tx: sp }));
      } catch (err) {
        this.deps.log.error(
          { err, repo: repo.id, phase: l.phase },
          'a change listener failed; the change and its events are kept',
        );
      }
    }
  }

  private committed(repo: RepoHandle): void {
    for (const l of this.listeners) {
      if (l.phase !== 'committed') continue;
      try {
        l.onCommitted(repo);
      } catch (err) {
        this.deps.log.error({ err, repo: repo.id }, 'a listener of a committed change failed');
      }
    }
  }
}
