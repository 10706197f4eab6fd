import client from 'prom-client';
import { ProbeServer } from '../telemetry/probe-server.ts';
import type { EventRecorder } from './events.ts';
import type { AgentPool, AgentPoolStatus } from './types.ts';

/** What the probes look at: the liveness of the loops and whether this replica can serve. */
export type HealthState = {
  /** Local time (ms) the current reconcile started; undefined while the work loop waits. */
  reconcilingSince?: number | undefined;
  /** Local time (ms) of the leader election loop's last completed round. */
  electionTick?: number | undefined;
  /** The pool watch has listed every pool (only the leader watches). */
  synced: boolean;
  leader: boolean;
  /** The last election round reached the API server (a standby able to take over). */
  electionOk: boolean;
};

/**
 * `/healthz` (liveness): fails when a reconcile has run for longer than `stuckMs` or the election
 * loop has not completed a round for that long (a process whose loops hang is restarted).
 * `/readyz` (readiness): the leader once its pool watch has synced; a standby once its last
 * election round reached the API server (it can take over).
 */
export function health(s: HealthState, now: number, stuckMs: number): { live: string[]; ready: string[] } {
  const live: string[] = [];
  if (s.reconcilingSince !== undefined && now - s.reconcilingSince > stuckMs)
    live.push(`a reconcile has been running for ${Math.round((now - s.reconcilingSince) / 1000)} s`);
  if (s.electionTick !== undefined && now - s.electionTick > stuckMs)
    live.push(`leader election last ran ${Math.round((now - s.electionTick) / 1000)} s ago`);
  const ready: string[] = [...live];
  if (s.leader && !s.synced) ready.push('leader: the pool watch has not synced yet');
  if (!s.leader && !s.electionOk) ready.push('standby: leader election cannot reach the API server');
  return { live, ready };
}

/** The reasons the errors counter and the Warning Events use. */
export const FAILURE_REASONS = [
  'InvalidSpec',
  'RegistrationFailed',
  'DeregistrationFailed',
  'ReconcileFailed',
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/**
 * The operator's Prometheus metrics (a registry of its own, with the process's default metrics)
 * and the HTTP server of `/healthz`, `/readyz` and `/metrics`.
 */
export class OperatorMetrics {
  readonly registry = new client.Registry();
  private readonly probes = new ProbeServer(this.registry);
  readonly pools;
  readonly leader;
  readonly desired;
  readonly replicas;
  readonly ready;
  readonly pending;
  readonly running;
  readonly pinned;
  readonly reconcileDuration;
  readonly reconcileErrors;
  readonly scalings;

  /** What each controller watches now (see countPools). */
  private readonly poolCounters: (() => number)[] = [];

  /** Adds a controller's pool count to `triad_operator_pools`. */
  countPools(count: () => number): void {
    this.poolCounters.push(count);
  }

  constructor() {
    const registers = [this.registry];
    const pool = ['namespace', 'pool'];
    client.collectDefaultMetrics({ register: this.registry, prefix: 'triad_operator_' });
    const counters = this.poolCounters;
    this.pools = new client.Gauge({
      name: 'triad_operator_pools',
      help: 'AgentPools watched',
      registers,
      // the sum over every controller (one per watched namespace), read when scraped
      collect() {
        this.set(counters.reduce((n, count) => n + count(), 0));
      },
    });
    this.leader = new client.Gauge({
      name: 'triad_operator_leader',
      help: '1 while this replica holds the lease and reconciles, else 0',
      registers,
    });
    const g = (name: string, help: string) =>
      new client.Gauge({ name: `triad_operator_pool_${name}`, help, labelNames: pool, registers });
    this.desired = g('desired_replicas', 'Agents the operator set on the pool (status.desiredReplicas)');
    this.replicas = g('replicas', 'Agent pods of the pool (status.replicas)');
    this.ready = g('ready_replicas', 'Ready agent pods of the pool (status.readyReplicas)');
    this.pending = g('pending', 'Pipelines waiting for an agent of the pool (its label set)');
    this.running = g('running', 'Pipelines running on agents of the pool (its label set)');
    this.pinned = g('pinned', '1 while spec.replicas pins the pool, else 0');
    this.reconcileDuration = new client.Histogram({
      name: 'triad_operator_reconcile_duration_seconds',
      help: 'Duration of reconciles by result (ok, error)',
      labelNames: ['result'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.reconcileErrors = new client.Counter({
      name: 'triad_operator_reconcile_errors_total',
      help: 'Reconciles that ended in a failure, by reason (InvalidSpec, RegistrationFailed, DeregistrationFailed, ReconcileFailed)',
      labelNames: ['reason'],
      registers,
    });
    this.scalings = new client.Counter({
      name: 'triad_operator_scalings_total',
      help: 'Replica changes written to agent Deployments, by direction (up, down)',
      labelNames: ['direction'],
      registers,
    });
    for (const reason of FAILURE_REASONS) this.reconcileErrors.inc({ reason }, 0);
    this.leader.set(0);
  }

  /** The pool gauges from the status just written. */
  setPool(namespace: string, pool: string, s: AgentPoolStatus, pinned: boolean): void {
    const l = { namespace, pool };
    this.desired.set(l, s.desiredReplicas ?? 0);
    this.replicas.set(l, s.replicas ?? 0);
    this.ready.set(l, s.readyReplicas ?? 0);
    this.pending.set(l, s.pending ?? 0);
    this.running.set(l, s.running ?? 0);
    this.pinned.set(l, pinned ? 1 : 0);
  }

  forgetPool(namespace: string, pool: string): void {
    for (const m of [this.desired, this.replicas, this.ready, this.pending, this.running, this.pinned])
      m.remove({ namespace, pool });
  }

  /** The port the endpoints are served on (undefined: not serving). */
  get port(): number | undefined {
    return this.probes.port;
  }

  serve(port: number, probe: () => { live: string[]; ready: string[] }): Promise<void> {
    return this.probes.listen(port, { '/healthz': () => probe().live, '/readyz': () => probe().ready });
  }

  close(): Promise<void> {
    return this.probes.close();
  }
}

/** What the reconciler reports: failures (Warning Events, the errors counter), scalings, the status. */
export type PoolObserver = {
  failed(pool: AgentPool, reason: FailureReason, message: string): void;
  scaled(pool: AgentPool, from: number, to: number, message: string): void;
  reconciled(pool: AgentPool, status: AgentPoolStatus, pinned: boolean): void;
};

/** A failure already reported (its Event recorded): the controller retries without another one. */
export class ReportedError extends Error {}

export const NO_OBSERVER: PoolObserver = { failed() {}, scaled() {}, reconciled() {} };

/** Events on the pool and the metrics, together. */
export function poolObserver(metrics: OperatorMetrics, events: EventRecorder): PoolObserver {
  return {
    failed(pool, reason, message) {
      metrics.reconcileErrors.inc({ reason });
      void events.record(pool, 'Warning', reason, message);
    },
    scaled(pool, from, to, message) {
      metrics.scalings.inc({ direction: to > from ? 'up' : 'down' });
      void events.record(pool, 'Normal', to > from ? 'ScaledUp' : 'ScaledDown', message);
    },
    reconciled(pool, status, pinned) {
      metrics.setPool(pool.metadata!.namespace!, pool.metadata!.name!, status, pinned);
    },
  };
}
