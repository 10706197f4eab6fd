/**
 * The persistent processes a server keeps between calls, in one pool per server: the contents
 * readers, Mercurial's command servers (bookkeeping and operations) and the WSGI workers. An
 * entry belongs to a group (its limits) and is keyed by the group's name and an id, the
 * repository's storage path for the per-repository groups.
 */

/** A process-like value the pool keeps: closing it is graceful (queued work finishes first). */
export interface Pooled {
  busy(): boolean;
  close(): void;
  /** A dead entry is replaced by the next `get`. */
  readonly dead?: boolean;
}

export type PoolGroup = {
  name: string;
  /** Most entries of the group at once: beyond, the least recently used are closed. */
  max?: number;
  /** An entry unused this long, and not busy, is closed. */
  idleMs: number;
  /** The entries see a change of the repository by themselves: `invalidate` leaves them. */
  survivesChange?: boolean;
};

type Entry = { group: PoolGroup; id: string; value: Pooled; lastUsed: number };

/**
 * Entries in least-recently-used order, one unref'd timer closing idle ones (started with the
 * first entry, stopped when none is left), `invalidate` for a changed or removed repository,
 * `close` at shutdown (the pool stays usable: a later `get` starts afresh).
 */
export class ProcessPool {
  private readonly entries = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;
  private every = Infinity;

  /**
   * The entry `id` of `group`, made by `open` when there is none (or it died). All entries of a
   * group are made by its one user, so they have the type its `open` gives.
   */
  get<T extends Pooled>(group: PoolGroup, id: string, open: () => T): T {
    const key = `${group.name}:${id}`;
    const now = Date.now();
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      this.entries.delete(key);
      if (entry.value.dead !== true) {
        entry.lastUsed = now;
        this.entries.set(key, entry);
        return entry.value as T;
      }
      entry.value.close();
    }
    const value = open();
    this.entries.set(key, { group, id, value, lastUsed: now });
    if (group.max !== undefined) this.shrink(group, key);
    this.schedule(group);
    return value;
  }

  /** Closes the entry `id` of `group` (only if it is `value`, when given). */
  drop(group: PoolGroup, id: string, value?: Pooled): void {
    const key = `${group.name}:${id}`;
    if (value === undefined || this.entries.get(key)?.value === value) this.close1(key);
  }

  /** Closes the entries of a repository (after a change, a deletion) but those that see changes. */
  invalidate(dir: string): void {
    for (const [key, e] of this.entries)
      if (e.id === dir && e.group.survivesChange !== true) this.close1(key);
  }

  /** Entries now, of one group or all. */
  size(group?: PoolGroup): number {
    if (group === undefined) return this.entries.size;
    let n = 0;
    for (const e of this.entries.values()) if (e.group.name === group.name) n += 1;
    return n;
  }

  evictIdle(now = Date.now()): void {
    for (const [key, e] of this.entries) {
      if (now - e.lastUsed >= e.group.idleMs && !e.value.busy()) this.close1(key);
    }
    if (this.entries.size === 0) this.stop();
  }

  close(): void {
    this.stop();
    for (const key of [...this.entries.keys()]) this.close1(key);
  }

  /** Least recently used first; a busy entry is closed gracefully (after its queue drains). */
  private shrink(group: PoolGroup, keep: string): void {
    let over = this.size(group) - (group.max ?? Infinity);
    for (const [key, e] of this.entries) {
      if (over <= 0) break;
      if (e.group.name !== group.name || key === keep) continue;
      this.close1(key);
      over -= 1;
    }
  }

  /** The idle check runs every half of the shortest idle time, 1 to 15 s apart. */
  private schedule(group: PoolGroup): void {
    const every = Math.max(1000, Math.min(group.idleMs / 2, 15_000));
    if (this.timer !== undefined && this.every <= every) return;
    this.stop();
    this.every = every;
    this.timer = setInterval(() => this.evictIdle(), every);
    this.timer.unref();
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.every = Infinity;
  }

  private close1(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    entry.value.close();
  }
}
