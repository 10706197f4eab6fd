import type { MergeCheck, VcsOps } from '../vcs/ops.ts';
import { RefNotFound } from '../vcs/ops.ts';
import type { RepoHandle } from '../domain/repo.ts';
import type { VcsKind } from '../vcs/index.ts';
import type { StoredCheck } from './repository.ts';

/** What the checks need of a repository: its kind and storage. */
type RepoDisk = Pick<RepoHandle, 'vcs' | 'path'>;

/** A live answer, or the ref that does not exist (any more). */
export type LiveCheck = { ok: true; check: StoredCheck } | { ok: false; missing: 'source' | 'target' };

type Deps = {
  ops: (kind: VcsKind) => VcsOps;
  /** How long a read waits for a check before it answers `checking` (the check goes on). */
  budgetMs: number;
  /** Entries kept (least recently used first out). */
  maxEntries?: number;
  /** Checks running at once in this process; more wait for a slot. */
  maxRunning?: number;
  onError?: (err: unknown) => void;
};

/**
 * Mergeability on read. A dry-run merge's answer depends only on the two heads (and the
 * repository), so results are cached by (repository, source head, target head): every read
 * resolves both heads (cheap) and looks them up, so a push to either side is a new key and a read
 * is never stale. The cache is an in-memory LRU per process: entries never go stale, a miss
 * only costs one check, and replicas need nothing shared.
 *
 * A check that does not finish within the budget answers `checking` and keeps running (one run per
 * key, also for concurrent readers); its result is cached for the next read.
 */
export class Mergeability {
  private readonly d: Deps;
  private readonly cache = new Map<string, StoredCheck>();
  private readonly running = new Map<string, Promise<MergeCheck>>();
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(deps: Deps) {
    this.d = deps;
  }

  /** Both heads; undefined for a ref that names nothing. */
  async heads(
    repo: RepoDisk,
    source: string,
    target: string,
  ): Promise<[string | undefined, string | undefined]> {
    const [sh, th] = await this.d.ops(repo.vcs).resolveRefs(repo.path, [source, target]);
    return [sh, th];
  }

  /** The mergeability of `source` into `target` now, within the budget (`budgetMs` overrides it). */
  async read(repo: RepoDisk, source: string, target: string, budgetMs = this.d.budgetMs): Promise<LiveCheck> {
    const [sh, th] = await this.heads(repo, source, target);
    return this.readAt(repo, source, target, sh, th, budgetMs);
  }

  /**
   * `read` for several pairs of refs of one repository (a page of pull requests): the heads of
   * all their refs are resolved with one VCS call, then each pair is read as `read` does (dry
   * runs limited by `maxRunning`).
   */
  async readMany(
    repo: RepoDisk,
    pairs: readonly { source: string; target: string }[],
    budgetMs = this.d.budgetMs,
  ): Promise<LiveCheck[]> {
    if (pairs.length === 0) return [];
    const names = [...new Set(pairs.flatMap((p) => [p.source, p.target]))];
    const ids = await this.d.ops(repo.vcs).resolveRefs(repo.path, names);
    const head = new Map(names.map((n, i) => [n, ids[i]]));
    return Promise.all(
      pairs.map((p) =>
        this.readAt(repo, p.source, p.target, head.get(p.source), head.get(p.target), budgetMs),
      ),
    );
  }

  private async readAt(
    repo: RepoDisk,
    source: string,
    target: string,
    sh: string | undefined,
    th: string | undefined,
    budgetMs: number,
  ): Promise<LiveCheck> {
    if (sh === undefined) return { ok: false, missing: 'source' };
    if (th === undefined) return { ok: false, missing: 'target' };
    const key = keyOf(repo, sh, th);
    const hit = this.cache.get(key);
    if (hit !== undefined) {
      this.cache.delete(key); // most recently used last
      this.cache.set(key, hit);
      return { ok: true, check: hit };
    }
    const run = this.start(repo, key, source, target);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), budgetMs)));
    try {
      const r = await Promise.race([run, late]);
      if (r === 'late') return { ok: true, check: checking(sh, th) };
      return { ok: true, check: stored(r) };
    } catch (e) {
      if (e instanceof RefNotFound) return { ok: false, missing: e.role };
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The cached answer for these heads, if any. */
  cached(repo: RepoDisk, sh: string, th: string): StoredCheck | undefined {
    return this.cache.get(keyOf(repo, sh, th));
  }

  /** The cached answer for these heads, or `checking` after starting a check in the background. */
  peek(repo: RepoDisk, source: string, target: string, sh: string, th: string): StoredCheck {
    const key = keyOf(repo, sh, th);
    const hit = this.cache.get(key);
    if (hit !== undefined) return hit;
    this.start(repo, key, source, target).catch(() => undefined);
    return checking(sh, th);
  }

  private start(repo: RepoDisk, key: string, source: string, target: string): Promise<MergeCheck> {
    const seen = this.running.get(key);
    if (seen !== undefined) return seen;
    const run = (async () => {
      await this.slot();
      try {
        const r = await this.d.ops(repo.vcs).checkMerge(repo.path, source, target);
        // Cached under the heads the check saw (a ref may have moved since the key was made).
        this.remember(keyOf(repo, r.sourceHead, r.targetHead), stored(r));
        return r;
      } finally {
        this.release();
        this.running.delete(key);
      }
    })();
    this.running.set(key, run);
    run.catch((err: unknown) => {
      if (!(err instanceof RefNotFound)) this.d.onError?.(err);
    });
    return run;
  }

  private remember(key: string, v: StoredCheck): void {
    this.cache.delete(key);
    this.cache.set(key, v);
    const max = this.d.maxEntries ?? 10_000;
    while (this.cache.size > max) {
      const oldest = this.cache.keys().next().value;
      if (oldest === undefined) break;
      this.cache.delete(oldest);
    }
  }

  private async slot(): Promise<void> {
    if (this.active < (this.d.maxRunning ?? 4)) {
      this.active += 1;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next !== undefined) next();
    else this.active -= 1;
  }
}

function keyOf(repo: RepoDisk, sh: string, th: string): string {
  return `${repo.path}\u0000${sh}\u0000${th}`;
}

function stored(r: MergeCheck): StoredCheck {
  return {
    head_commit: r.sourceHead,
    base_commit: r.targetHead,
    mergeable_state: r.state,
    conflicted_files: r.conflictedFiles,
    commits_ahead: r.commitsAhead,
    commits_behind: r.commitsBehind,
  };
}

/** Heads known, the check still running: no counts or paths yet. */
function checking(sh: string, th: string): StoredCheck {
  return {
    head_commit: sh,
    base_commit: th,
    mergeable_state: 'checking',
    conflicted_files: [],
    commits_ahead: 0,
    commits_behind: 0,
  };
}
