import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type ObjectCache,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { formatLabels } from '../pipelines/labels.ts';
import { NO_OBSERVER, ReportedError, type OperatorMetrics, type PoolObserver } from './observe.ts';
import { Reconciler } from './reconciler.ts';
import { inSpan } from '../telemetry/spans.ts';
import { QueueWatcher } from './scaling.ts';
import type { TriadApi } from './triad-api.ts';
import {
  API_VERSION,
  GROUP,
  keyOf,
  LABEL_MANAGED_BY,
  LABEL_POOL,
  MANAGED_BY,
  notFound,
  PLURAL,
  settings,
  specProblem,
  VERSION,
  type AgentPool,
} from './types.ts';
import type { StepPolicySettings } from './step-policy.ts';

export type ControllerOptions = {
  resyncMs: number;
  sweepGraceMs: number;
  /** Namespaces besides a pool's own where its steps may run (`*`: any). */
  stepNamespaces: readonly string[];
  /** Only the pools (and objects) of this namespace; undefined: the whole cluster. */
  namespace?: string | undefined;
  /** Events and metrics of the pools (none: nothing reported). */
  observer?: PoolObserver;
  metrics?: OperatorMetrics;
  /** Set: each pool's step namespace gets a NetworkPolicy (TRIAD_OPERATOR_STEP_POLICY). */
  stepPolicy?: StepPolicySettings | undefined;
};

/**
 * The AgentPool controller: informers on the pools and on the Deployments and Secrets it made
 * (a change or deletion of either requeues its pool), a queue of pool keys worked one at a time,
 * a periodic resync of every pool, and one queue watcher per label set in use (a change of the
 * figures requeues the pools of that set). Runs only while this replica leads.
 */
export class Controller {
  private readonly reconciler: Reconciler;
  private readonly custom: CustomObjectsApi;
  private readonly pools: Informer<AgentPool> & ObjectCache<AgentPool>;
  private readonly owned: (Informer<KubernetesObject> & ObjectCache<KubernetesObject>)[];
  private readonly watchers = new Map<string, QueueWatcher>();
  private readonly queued = new Set<string>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly failures = new Map<string, number>();
  private wake: (() => void) | undefined;
  private running = false;
  private resync: NodeJS.Timeout | undefined;
  /** Local time the current reconcile started (undefined while waiting): what liveness looks at. */
  reconcilingSince: number | undefined;
  /** Every watch has listed its objects once. */
  synced = false;

  private readonly api: TriadApi;
  private readonly log: Logger;
  private readonly o: ControllerOptions;

  constructor(kc: KubeConfig, api: TriadApi, log: Logger, o: ControllerOptions) {
    this.api = api;
    this.log = log;
    this.o = o;
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.reconciler = new Reconciler({
      kc,
      api,
      log,
      queue: (labels) => {
        const w = this.watchers.get(formatLabels(labels));
        return { figures: w?.figures, error: w?.error };
      },
      sweepGraceMs: o.sweepGraceMs,
      stepNamespaces: o.stepNamespaces,
      observer: o.observer,
      stepPolicy: o.stepPolicy,
    });
    const ns = o.namespace;
    const at = (group: string, plural: string) =>
      `${group}${ns === undefined ? '' : `/namespaces/${ns}`}/${plural}`;
    this.pools = makeInformer<AgentPool>(
      kc,
      at(`/apis/${API_VERSION}`, PLURAL),
      () =>
        (ns === undefined
          ? this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })
          : this.custom.listNamespacedCustomObject({
              group: GROUP,
              version: VERSION,
              plural: PLURAL,
              namespace: ns,
            })) as Promise<KubernetesListObject<AgentPool>>,
    );
    const apps = kc.makeApiClient(AppsV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    const labelSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
    this.owned = [
      makeInformer<KubernetesObject>(
        kc,
        at('/apis/apps/v1', 'deployments'),
        () =>
          ns === undefined
            ? apps.listDeploymentForAllNamespaces({ labelSelector })
            : apps.listNamespacedDeployment({ namespace: ns, labelSelector }),
        labelSelector,
      ),
      makeInformer<KubernetesObject>(
        kc,
        at('/api/v1', 'secrets'),
        () =>
          ns === undefined
            ? core.listSecretForAllNamespaces({ labelSelector })
            : core.listNamespacedSecret({ namespace: ns, labelSelector }),
        labelSelector,
      ),
    ];
    // while it leads (a standby's cache stays empty)
    o.metrics?.countPools(() => (this.running ? this.pools.list().length : 0));
  }

  async start(): Promise<void> {
    this.running = true;
    const onPool = (p: AgentPool) => this.enqueue(keyOf(p));
    this.pools.on('add', onPool);
    this.pools.on('update', onPool);
    this.pools.on('delete', (p) => this.syncWatchers(p));
    const onOwned = (o: KubernetesObject) => {
      const pool = o.metadata?.labels?.[LABEL_POOL];
      if (pool !== undefined) this.enqueue(`${o.metadata?.namespace ?? ''}/${pool}`);
    };
    for (const inf of [this.pools as unknown as Informer<KubernetesObject>, ...this.owned]) {
      if (inf !== (this.pools as unknown)) {
        inf.on('update', onOwned);
        inf.on('delete', onOwned);
      }
      inf.on('error', (err) => {
        if (!this.running) return;
        this.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'watch ended; restarting');
        setTimeout(() => void inf.start().catch(() => undefined), 1000);
      });
      await inf.start();
    }
    this.synced = true;
    this.resync = setInterval(() => {
      for (const p of this.pools.list()) this.enqueue(keyOf(p));
    }, this.o.resyncMs);
    void this.work();
  }

  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.resync);
    for (const t of this.timers.values()) clearTimeout(t);
    for (const w of this.watchers.values()) w.close();
    for (const inf of [this.pools as unknown as Informer<KubernetesObject>, ...this.owned]) await inf.stop();
    this.wake?.();
  }

  private enqueue(key: string): void {
    this.queued.add(key);
    this.wake?.();
  }

  private later(key: string, ms: number): void {
    clearTimeout(this.timers.get(key));
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        this.enqueue(key);
      }, ms),
    );
  }

  /** Queue watchers for exactly the label sets of the pools that exist. */
  private syncWatchers(changed?: AgentPool): void {
    const wanted = new Map<string, Record<string, string>>();
    for (const p of this.pools.list()) {
      if (changed !== undefined && keyOf(p) === keyOf(changed) && p.metadata?.deletionTimestamp !== undefined)
        continue;
      // a pool that cannot run (invalid labels among others) is not scaled: nothing to watch
      if (specProblem(p, this.o.stepNamespaces) !== undefined) continue;
      const labels = settings(p).labels;
      wanted.set(formatLabels(labels), labels);
    }
    for (const [key, w] of this.watchers) {
      if (!wanted.has(key)) {
        w.close();
        this.watchers.delete(key);
      }
    }
    for (const [key, labels] of wanted) {
      if (this.watchers.has(key)) continue;
      const w = new QueueWatcher(
        this.api,
        key,
        labels,
        () => {
          for (const p of this.pools.list())
            if (formatLabels(settings(p).labels) === key) this.enqueue(keyOf(p));
        },
        this.log,
      );
      this.watchers.set(key, w);
      w.start();
    }
  }

  private async work(): Promise<void> {
    while (this.running) {
      const key = this.queued.values().next().value;
      if (key === undefined) {
        await new Promise<void>((r) => (this.wake = r));
        this.wake = undefined;
        continue;
      }
      this.queued.delete(key);
      // one span per reconcile (with tracing on): its Kubernetes and Triad calls happen under it
      await inSpan('operator.reconcile', { attributes: { 'k8s.agentpool': key } }, () =>
        this.reconcileKey(key),
      );
    }
  }

  private async reconcileKey(key: string): Promise<void> {
    const [namespace, name] = key.split('/') as [string, string];
    this.reconcilingSince = Date.now();
    const timer = this.o.metrics?.reconcileDuration.startTimer();
    let result = 'ok';
    try {
      const pool = (await this.custom
        .getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name })
        .catch((err: unknown) => {
          if (notFound(err)) return undefined;
          throw err;
        })) as AgentPool | undefined;
      this.syncWatchers();
      if (pool === undefined) {
        this.reconciler.timer.forget(key);
        this.o.metrics?.forgetPool(namespace, name);
        return;
      }
      const r = await this.reconciler.reconcile(pool);
      this.failures.delete(key);
      if (r.requeueAfterMs !== undefined) this.later(key, r.requeueAfterMs);
    } catch (err) {
      result = 'error';
      const pool = this.pools.get(name, namespace);
      if (!(err instanceof ReportedError) && pool !== undefined)
        (this.o.observer ?? NO_OBSERVER).failed(
          pool,
          'ReconcileFailed',
          err instanceof Error ? err.message : String(err),
        );
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const wait = Math.min(30_000, 500 * 2 ** Math.min(n, 6));
      this.log.warn(
        { pool: key, err: err instanceof Error ? err.message : String(err), retryInMs: wait },
        'reconcile failed',
      );
      this.later(key, wait);
    } finally {
      timer?.({ result });
      this.reconcilingSince = undefined;
    }
  }
}
