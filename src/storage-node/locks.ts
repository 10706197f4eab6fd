import { Gate } from '../vcs/process/gate.ts';

type Holder = { repo: string; since: number };
type Held = Holder & { until: number };
const RECENT = 200;

/**
 * The node's own lock of each repository: one change at a time, held for a mutating backend's
 * whole run, whatever the servers' database lock says (the fencing a shared volume lacks). Waiters
 * queue in order. `held` tells what is locked now (tests; an operator's question).
 */
export class RepoLocks {
  private readonly gates = new Map<string, Gate>();
  private readonly holders = new Map<string, Holder>();
  private readonly past: Held[] = [];
  private readonly never = new AbortController().signal;

  async run<T>(repo: string, fn: () => Promise<T>): Promise<T> {
    let g = this.gates.get(repo);
    if (g === undefined) {
      g = new Gate(1);
      this.gates.set(repo, g);
    }
    const gate = g;
    const leave = await gate.enter(this.never);
    const holder = { repo, since: Date.now() };
    this.holders.set(repo, holder);
    try {
      return await fn();
    } finally {
      this.holders.delete(repo);
      this.past.push({ ...holder, until: Date.now() });
      if (this.past.length > RECENT) this.past.shift();
      leave();
      if (gate.idle()) this.gates.delete(repo);
    }
  }

  private readonly reading = new Map<string, number>();
  private readonly leaving = new Set<string>();
  private readonly drained = new Map<string, (() => void)[]>();

  /**
   * A read of `repo` (no lock) begins: answers the function that ends it, or undefined when the
   * repository is leaving the node (a move), which the caller answers as "not here".
   */
  read(repo: string): (() => void) | undefined {
    if (this.leaving.has(repo)) return undefined;
    this.reading.set(repo, (this.reading.get(repo) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.reading.get(repo) ?? 1) - 1;
      if (left > 0) {
        this.reading.set(repo, left);
        return;
      }
      this.reading.delete(repo);
      for (const wake of this.drained.get(repo) ?? []) wake();
      this.drained.delete(repo);
    };
  }

  /**
   * Under the repository's lock, before its files go: no new read begins, and the reads under
   * way end first (at most `maxMs`). `fn` runs then; afterwards the repository may arrive again.
   */
  async leave<T>(repo: string, maxMs: number, fn: () => Promise<T>): Promise<T> {
    this.leaving.add(repo);
    try {
      if ((this.reading.get(repo) ?? 0) > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, maxMs);
          const wake = () => {
            clearTimeout(timer);
            resolve();
          };
          this.drained.set(repo, [...(this.drained.get(repo) ?? []), wake]);
        });
      }
      return await fn();
    } finally {
      this.leaving.delete(repo);
    }
  }

  /** Whether a repository is leaving (its reads answer "not here"). */
  isLeaving(repo: string): boolean {
    return this.leaving.has(repo);
  }

  /** What is locked now, and the last locks held with when they were released. */
  held(): { now: Holder[]; recent: Held[] } {
    return { now: [...this.holders.values()], recent: [...this.past] };
  }
}
