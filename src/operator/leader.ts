import {
  ApiException,
  CoordinationV1Api,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';

export type LeaderOptions = {
  namespace: string;
  name: string;
  identity: string;
  /** How long a lease holds without renewal (another replica takes over after that). */
  leaseSeconds: number;
  /** How often the leader renews and the others try. */
  retryMs: number;
};

const conflict = (err: unknown) => err instanceof ApiException && (err.code === 409 || err.code === 404);

/**
 * Lease-based leader election (`coordination.k8s.io/v1`): one operator replica holds the Lease and
 * renews it; the others take it over once it has not been renewed for `leaseSeconds`. Writes use
 * the Lease's resourceVersion, so two replicas racing for it cannot both win. `onLead` runs when
 * this replica becomes leader; `onLose` when it can no longer renew (the caller stops working).
 */
export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private timer: NodeJS.Timeout | undefined;
  private leading = false;
  private stopped = false;
  /** Local time of this replica's last successful hold of the lease. */
  private lastHeld = 0;
  /** The holder and renew time last read, and the local time they were first seen. */
  private observed: { holder: string; renewTime: string; at: number } | undefined;
  /** Local time the last round ended (what liveness looks at) and whether it reached the API server. */
  lastRound: number | undefined;
  lastRoundOk = false;

  private readonly o: LeaderOptions;
  private readonly log: Logger;
  private readonly onLead: () => void;
  private readonly onLose: () => void;

  constructor(kc: KubeConfig, o: LeaderOptions, log: Logger, onLead: () => void, onLose: () => void) {
    this.o = o;
    this.log = log;
    this.onLead = onLead;
    this.onLose = onLose;
    this.api = kc.makeApiClient(CoordinationV1Api);
  }

  /**
   * How long a leader goes on without a successful renewal: the lease duration less one retry
   * period, so it stops before another replica can take the lease over.
   */
  private get renewDeadlineMs(): number {
    return Math.max(this.o.retryMs, this.o.leaseSeconds * 1000 - this.o.retryMs);
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.lastRound = Date.now();
    const tick = async () => {
      if (this.stopped) return;
      try {
        const held = await this.tryHold();
        this.lastRoundOk = true;
        if (held) this.lastHeld = Date.now();
        if (held && !this.leading) {
          this.leading = true;
          this.log.info({ identity: this.o.identity }, 'became leader');
          this.onLead();
        } else if (!held && this.leading) {
          this.leading = false;
          this.log.warn({ identity: this.o.identity }, 'lost the lease');
          this.onLose();
        }
      } catch (err) {
        this.lastRoundOk = false;
        this.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'leader election failed');
        // Renewal failing: once another replica may have taken the lease, stop leading.
        if (this.leading && Date.now() - this.lastHeld >= this.renewDeadlineMs) {
          this.leading = false;
          this.log.warn({ identity: this.o.identity }, 'could not renew the lease in time');
          this.onLose();
        }
      }
      this.lastRound = Date.now();
      if (!this.stopped) this.timer = setTimeout(() => void tick(), this.o.retryMs);
    };
    void tick();
  }

  /** Stops renewing; a leader releases the lease so another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (!this.leading) return;
    this.leading = false;
    try {
      const lease = await this.api.readNamespacedLease({ name: this.o.name, namespace: this.o.namespace });
      if (lease.spec?.holderIdentity !== this.o.identity) return;
      lease.spec = { leaseDurationSeconds: lease.spec.leaseDurationSeconds };
      await this.api.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: lease });
    } catch {
      // it expires by itself
    }
  }

  /** Acquires or renews the lease; false when another live replica holds it. */
  private async tryHold(): Promise<boolean> {
    const { name, namespace, identity, leaseSeconds } = this.o;
    const now = new V1MicroTime(Date.now());
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 404)) throw err;
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: leaseSeconds,
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 0,
            },
          },
        });
        return true;
      } catch (e) {
        if (conflict(e)) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity;
    // Expiry by the local clock: the holder's renewTime (written with its clock) is only compared
    // with what this replica read before; unchanged for the lease duration means expired.
    const seen = { holder: holder ?? '', renewTime: String(spec.renewTime?.valueOf() ?? '') };
    if (this.observed?.holder !== seen.holder || this.observed.renewTime !== seen.renewTime)
      this.observed = { ...seen, at: Date.now() };
    const expired = this.observed.at + (spec.leaseDurationSeconds ?? leaseSeconds) * 1000 < Date.now();
    if (holder !== undefined && holder !== '' && holder !== identity && !expired) return false;
    const mine = holder === identity;
    const micro = (t: Date | undefined) =>
      t === undefined ? undefined : new V1MicroTime(new Date(t).getTime());
    lease.spec = {
      ...spec,
      acquireTime: micro(spec.acquireTime),
      holderIdentity: identity,
      leaseDurationSeconds: leaseSeconds,
      renewTime: now,
      ...(mine ? {} : { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
    };
    try {
      await this.api.replaceNamespacedLease({ name, namespace, body: lease });
      return true;
    } catch (err) {
      if (conflict(err)) return false;
      throw err;
    }
  }
}
