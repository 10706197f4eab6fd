import type { VcsKind } from '../constants.ts';
import type { RepoReader } from '../reader.ts';

export type ReaderFactory = (vcs: VcsKind, repoPath: string) => RepoReader;

export type PoolOptions = {
  /** Most repositories with live processes at once (one persistent process each). */
  max?: number;
  /** A reader unused this long is closed. */
  idleMs?: number;
};

type Slot = { reader: RepoReader; vcs: VcsKind; lastUsed: number };

/**
 * At most `max` readers (each one persistent process) across all repositories, least recently
 * used evicted first, idle ones closed after `idleMs`. `invalidate` drops a repository's reader
 * after a push so the next read starts afresh.
 */
export class ReaderPool {
  private readonly slots = new Map<string, Slot>();
  private readonly max: number;
  private readonly idleMs: number;
  private readonly factory: ReaderFactory;
  private readonly timer: NodeJS.Timeout;

  constructor(factory: ReaderFactory, opts: PoolOptions = {}) {
    this.factory = factory;
    this.max = Math.max(1, opts.max ?? 32);
    this.idleMs = opts.idleMs ?? 60_000;
    this.timer = setInterval(() => this.evictIdle(), Math.max(1000, Math.min(this.idleMs / 2, 15_000)));
    this.timer.unref();
  }

  get(vcs: VcsKind, repoPath: string): RepoReader {
    const now = Date.now();
    const slot = this.slots.get(repoPath);
    if (slot !== undefined && slot.vcs === vcs) {
      this.slots.delete(repoPath);
      slot.lastUsed = now;
      this.slots.set(repoPath, slot);
      return slot.reader;
    }
    if (slot !== undefined) this.drop(repoPath);
    const reader = this.factory(vcs, repoPath);
    this.slots.set(repoPath, { reader, vcs, lastUsed: now });
    if (this.slots.size > this.max) {
      // Least recently used first; a busy reader is closed gracefully (after its queue drains).
      for (const key of this.slots.keys()) {
        if (this.slots.size <= this.max) break;
        if (key !== repoPath) this.drop(key);
      }
    }
    return reader;
  }

  /** Forget a repository's processes and caches (after a push, a delete). */
  invalidate(repoPath: string): void {
    this.drop(repoPath);
  }

  size(): number {
    return this.slots.size;
  }

  evictIdle(now = Date.now()): void {
    for (const [key, slot] of this.slots) {
      if (now - slot.lastUsed >= this.idleMs && !slot.reader.busy()) this.drop(key);
    }
  }

  close(): void {
    clearInterval(this.timer);
    for (const key of [...this.slots.keys()]) this.drop(key);
  }

  private drop(key: string): void {
    const slot = this.slots.get(key);
    if (slot === undefined) return;
    this.slots.delete(key);
    slot.reader.close();
  }
}
