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

  /** What is locked now, and the last locks held with when they were released. */
  held(): { now: Holder[]; recent: Held[] } {
    return { now: [...this.holders.values()], recent: [...this.past] };
  }
}
