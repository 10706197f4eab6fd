import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { releaseLease, takeLease } from './lease-repository.ts';

/** The lease of the replica that exports the cluster-wide gauges. */
export const METRICS_LEASE = 'cluster-metrics';
/** How long a replica keeps the lease without renewing it (it renews on scrapes and every 20 s). */
export const METRICS_LEASE_SECONDS = 60;

/**
 * The election of one replica among those sharing a database: whoever takes the lease first holds
 * it while it keeps renewing it (every scrape, and a third of the lease's length), and another replica takes it once it lapsed (its
 * holder died or stopped being scraped) or was released (its holder stopped). A lease row, not a
 * session-level advisory lock: it works through a transaction-mode pooler.
 */
export class ClusterLease {
  /** Names this replica in the lease row (host name, process id, a random part per server). */
  readonly holder = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly em: () => EntityManager;
  private readonly log: Logger;
  private readonly name: string;
  private readonly seconds: number;
  /** The question under way: the gauges of one scrape, collected at once, share it. */
  private asking: Promise<boolean> | undefined;
  private released = false;
  /** While this replica holds the lease: renews it between scrapes (any scrape interval works). */
  private renewal: NodeJS.Timeout | undefined;

  constructor(deps: { em: () => EntityManager; log: Logger; name?: string; seconds?: number }) {
    this.em = deps.em;
    this.log = deps.log;
    this.name = deps.name ?? METRICS_LEASE;
    this.seconds = deps.seconds ?? METRICS_LEASE_SECONDS;
  }

  /** Takes or renews the lease; whether this replica holds it (false when the database fails). */
  holds(): Promise<boolean> {
    if (this.released) return Promise.resolve(false);
    this.asking ??= takeLease(this.em().fork(), this.name, this.holder, this.seconds)
      .catch((err: unknown) => {
        this.log.warn({ err }, 'the cluster metrics lease could not be renewed');
        return false;
      })
      .then((held) => {
        this.keepRenewing(held);
        return held;
      })
      .finally(() => {
        this.asking = undefined;
      });
    return this.asking;
  }

  /**
   * A holder renews its lease every third of its length, so a scrape interval longer than the
   * lease does not let it lapse (two replicas would then both export between their scrapes).
   */
  private keepRenewing(held: boolean): void {
    if (!held || this.released) {
      clearInterval(this.renewal);
      this.renewal = undefined;
      return;
    }
    if (this.renewal !== undefined) return;
    this.renewal = setInterval(() => void this.holds(), Math.max(1000, (this.seconds * 1000) / 3));
    this.renewal.unref();
  }

  /** Gives the lease up at shutdown. */
  async release(): Promise<void> {
    this.released = true;
    clearInterval(this.renewal);
    this.renewal = undefined;
    await releaseLease(this.em().fork(), this.name, this.holder).catch(() => undefined);
  }
}
