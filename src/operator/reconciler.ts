import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObject,
  type V1Condition,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { formatLabels } from '../pipelines/labels.ts';
import { deployment, role, roleBinding, serviceAccount, tokenSecret } from './resources.ts';
import { scaleMessage } from './events.ts';
import { NO_OBSERVER, ReportedError, type PoolObserver } from './observe.ts';
import { agentSelector, busyInstances, ScaleDownTimer, wantedReplicas } from './scaling.ts';
import { stepNetworkPolicy, type StepPolicySettings } from './step-policy.ts';
import { sweepSteps, markBusyAgents } from './sweeper.ts';
import type { QueueFigures, RegisteredAgent, TriadApi } from './triad-api.ts';
import {
  ANNOTATION_AGENT_ID,
  ANNOTATION_SKIP_DEREGISTRATION,
  FINALIZER,
  GROUP,
  keyOf,
  MANAGER,
  MERGE,
  notFound,
  names,
  PLURAL,
  settings,
  specProblem,
  stepNamespace,
  stepNamespaceProblem,
  VERSION,
  type AgentPool,
  type AgentPoolStatus,
} from './types.ts';

export type ReconcileDeps = {
  kc: KubeConfig;
  api: TriadApi;
  log: Logger;
  /** The latest queue figures of a label set (undefined until the first answer) and the watch error. */
  queue: (labels: Record<string, string>) => { figures?: QueueFigures; error?: string };
  /** Step pods and claims younger than this are never swept (their claim may be on its way). */
  sweepGraceMs: number;
  /** Namespaces besides a pool's own where its steps may run (`*`: any). */
  stepNamespaces: readonly string[];
  /** Events, metrics (none: nothing reported). */
  observer?: PoolObserver;
  /** Set: each pool's step namespace gets its NetworkPolicy (step-policy.ts). */
  stepPolicy?: StepPolicySettings | undefined;
};

/**
 * One idempotent pass over a pool, from what exists now (level-triggered): finalizer, objects
 * (server-side apply, so drift is repaired), the agent registration and its token Secret, the
 * agents' replicas from the queue, leftovers of finished pipelines, and the status. Returns when
 * to look again (a waiting scale-down), if ever.
 */
export class Reconciler {
  private readonly objects: KubernetesObjectApi;
  private readonly core: CoreV1Api;
  private readonly apps: AppsV1Api;
  private readonly custom: CustomObjectsApi;
  readonly timer = new ScaleDownTimer();

  private readonly d: ReconcileDeps;
  private readonly obs: PoolObserver;

  constructor(d: ReconcileDeps) {
    this.d = d;
    this.obs = d.observer ?? NO_OBSERVER;
    this.objects = KubernetesObjectApi.makeApiClient(d.kc);
    this.core = d.kc.makeApiClient(CoreV1Api);
    this.apps = d.kc.makeApiClient(AppsV1Api);
    this.custom = d.kc.makeApiClient(CustomObjectsApi);
  }

  private apply<T extends KubernetesObject>(o: T): Promise<T> {
    return this.objects.patch(o, undefined, undefined, MANAGER, true, PatchStrategy.ServerSideApply);
  }

  async reconcile(pool: AgentPool): Promise<{ requeueAfterMs?: number }> {
    const meta = pool.metadata!;
    if (meta.deletionTimestamp !== undefined) {
      await this.finalize(pool);
      return {};
    }
    if (!(meta.finalizers ?? []).includes(FINALIZER)) {
      await this.custom.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace: meta.namespace!,
          name: meta.name!,
          body: {
            metadata: {
              finalizers: [...(meta.finalizers ?? []), FINALIZER],
              resourceVersion: meta.resourceVersion,
            },
          },
        },
        MERGE,
      );
    }
    const problem = specProblem(pool, this.d.stepNamespaces);
    if (problem !== undefined) {
      this.obs.failed(pool, 'InvalidSpec', problem);
      await this.writeStatus(pool, {}, [
        cond('Ready', false, 'InvalidSpec', problem),
        cond('Scaling', false, 'InvalidSpec', 'the pool is not scaled until its spec is fixed'),
        cond('Degraded', true, 'InvalidSpec', problem),
      ]);
      return {};
    }
    await this.apply(serviceAccount(pool));
    await this.apply(role(pool));
    await this.apply(roleBinding(pool));
    if (this.d.stepPolicy !== undefined) await this.apply(stepNetworkPolicy(pool, this.d.stepPolicy));

    let agents: RegisteredAgent[];
    let agent: RegisteredAgent;
    try {
      agents = await this.d.api.agents();
      agent = await this.registration(pool, agents);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.obs.failed(pool, 'RegistrationFailed', message);
      await this.writeStatus(pool, {}, [
        cond('Ready', false, 'ServerUnavailable', message),
        cond('Degraded', true, 'ServerUnavailable', message),
      ]);
      return { requeueAfterMs: 5000 };
    }

    const s = settings(pool);
    const n = names(pool);
    const existing = await this.apps
      .readNamespacedDeployment({ name: n.agents, namespace: meta.namespace! })
      .catch((err: unknown) => {
        if (notFound(err)) return undefined;
        throw err;
      });
    const current = existing?.spec?.replicas ?? s.minReplicas;
    const q = this.d.queue(s.labels);
    let replicas = current;
    let recheck: number | undefined;
    let downAt: number | undefined;
    let wanted = replicas;
    // spec.replicas pins the pool (the scale subresource): used as is, the queue does not scale it
    const pinned = pool.spec.replicas;
    if (pinned !== undefined) {
      this.timer.forget(keyOf(pool));
      replicas = wanted = pinned;
    } else if (q.figures !== undefined) {
      wanted = wantedReplicas(
        q.figures,
        { capacity: s.capacity, min: s.minReplicas, max: s.maxReplicas },
        busyInstances(agent),
      );
      const decided = this.timer.decide(keyOf(pool), wanted, current, s.scaleDownDelaySeconds * 1000);
      replicas = decided.replicas;
      recheck = decided.recheckInMs;
      downAt = decided.downAt;
    }
    if (pinned === undefined) replicas = Math.min(s.maxReplicas, Math.max(s.minReplicas, replicas));
    const d = deployment(pool, replicas, this.d.api.server);
    d.spec!.template.metadata!.annotations = { [ANNOTATION_AGENT_ID]: String(agent.id) };
    // Busy agents get their deletion cost before a lower replica count lets the ReplicaSet choose.
    await markBusyAgents(this.core, pool, agent);
    const applied = await this.apply(d);
    const before = existing?.spec?.replicas ?? 0;
    if (replicas !== before) {
      const cause = {
        min: s.minReplicas,
        max: s.maxReplicas,
        capacity: s.capacity,
        busy: busyInstances(agent),
      };
      const why = { ...cause, pinned, figures: q.figures, delaySeconds: s.scaleDownDelaySeconds };
      this.obs.scaled(pool, before, replicas, scaleMessage(before, replicas, why));
    }

    await sweepSteps(this.core, pool, stepNamespace(pool), agent, this.d.sweepGraceMs, this.d.log);

    const ready = applied.status?.readyReplicas ?? 0;
    const have = applied.status?.replicas ?? 0;
    const scaling = have !== replicas || ready < replicas;
    const conditions = [
      ready >= replicas
        ? cond(
            'Ready',
            true,
            replicas === 0 ? 'ScaledToZero' : 'AgentsReady',
            `${ready} of ${replicas} agents ready`,
          )
        : cond('Ready', false, 'AgentsStarting', `${ready} of ${replicas} agents ready`),
      scaling
        ? cond(
            'Scaling',
            true,
            replicas > have ? 'ScalingUp' : 'ScalingDown',
            `${have} agents, ${replicas} wanted`,
          )
        : recheck !== undefined
          ? cond(
              'Scaling',
              true,
              'ScaleDownDelayed',
              // an absolute time: the status stays the same while the delay runs
              `less work: down to ${wanted} at ${new Date(downAt ?? 0).toISOString()} unless it returns`,
            )
          : cond(
              'Scaling',
              false,
              'Stable',
              `${replicas} agents ${pinned === undefined ? 'for the queue' : '(pinned)'}`,
            ),
      q.error !== undefined
        ? cond('Degraded', true, 'QueueUnavailable', q.error)
        : cond('Degraded', false, 'AsExpected', 'the pool is reconciled'),
      pinned === undefined
        ? cond(
            'Pinned',
            false,
            'QueueScaling',
            'the queue scales the pool within minReplicas and maxReplicas',
          )
        : cond(
            'Pinned',
            true,
            'SpecReplicas',
            `spec.replicas pins the pool at ${pinned}: the queue does not scale it`,
          ),
    ];
    const fields: AgentPoolStatus = {
      replicas: have,
      readyReplicas: ready,
      desiredReplicas: replicas,
      pending: q.figures?.pending ?? 0,
      running: q.figures?.running ?? 0,
      agentId: agent.id,
      agentName: agent.name,
    };
    await this.writeStatus(pool, fields, conditions);
    this.obs.reconciled(pool, fields, pinned !== undefined);
    // While agents start or stop, look again soon (the Deployment's informer also wakes us).
    return { requeueAfterMs: recheck ?? (scaling ? 2000 : undefined) };
  }

  /**
   * The pool's agent on the server and its token Secret. A Secret naming an agent that exists is
   * kept; otherwise (first pass, Secret deleted, agent deregistered elsewhere, or a crash between
   * registering and writing the Secret) every agent of the pool's name is deregistered and a new
   * one registered, so no registration is ever left dangling.
   */
  private async registration(pool: AgentPool, agents: RegisteredAgent[]): Promise<RegisteredAgent> {
    const n = names(pool);
    const ns = pool.metadata!.namespace!;
    const secret = await this.core
      .readNamespacedSecret({ name: n.secret, namespace: ns })
      .catch((err: unknown) => {
        if (notFound(err)) return undefined;
        throw err;
      });
    const id = Number(secret?.metadata?.annotations?.[ANNOTATION_AGENT_ID]);
    const known = agents.find((a) => a.id === id && a.name === n.agentName);
    if (secret?.data?.token !== undefined && known !== undefined) return known;
    for (const a of agents.filter((x) => x.name === n.agentName)) await this.d.api.deregister(a.id);
    const created = await this.d.api.register(n.agentName);
    await this.apply(tokenSecret(pool, created.id, created.token));
    this.d.log.info({ pool: keyOf(pool), agent: created.id }, 'registered the pool as an agent');
    return { id: created.id, name: n.agentName, instances: [], running_pipelines: [] };
  }

  /**
   * Deregisters the pool's agent and deletes what owner references cannot reach, then lets the pool
   * go. While the server cannot be asked (down, gone, or refusing the operator's token) the pool
   * stays, with `Degraded=True/DeregistrationFailed`; the annotation `triad.dev/skip-deregistration:
   * "true"` lets it go without (the registration is then left on the server, and logged).
   */
  private async finalize(pool: AgentPool): Promise<void> {
    const meta = pool.metadata!;
    if (!(meta.finalizers ?? []).includes(FINALIZER)) return;
    const n = names(pool);
    if (meta.annotations?.[ANNOTATION_SKIP_DEREGISTRATION] === 'true') {
      this.d.log.warn(
        { pool: keyOf(pool), agent: n.agentName, agentId: pool.status?.agentId },
        'pool deleted with skip-deregistration: its agent is left registered on the server',
      );
    } else {
      try {
        for (const a of (await this.d.api.agents()).filter((x) => x.name === n.agentName)) {
          await this.d.api.deregister(a.id);
        }
      } catch (err) {
        const message = `cannot deregister the agent ${n.agentName}: ${err instanceof Error ? err.message : String(err)}; retrying (annotate the pool ${ANNOTATION_SKIP_DEREGISTRATION}=true to delete it without)`;
        await this.writeStatus(pool, pool.status ?? {}, [
          cond('Ready', false, 'Deleting', 'the pool is being deleted'),
          cond('Degraded', true, 'DeregistrationFailed', message),
        ]).catch(() => undefined);
        this.obs.failed(pool, 'DeregistrationFailed', message);
        throw new ReportedError(message);
      }
    }
    // (never in a namespace the pool was not allowed: nothing was made there, and a Role of that
    // name would be someone else's)
    if (
      stepNamespace(pool) !== meta.namespace &&
      stepNamespaceProblem(pool, this.d.stepNamespaces) === undefined
    ) {
      const policy = this.d.stepPolicy === undefined ? [] : [stepNetworkPolicy(pool, this.d.stepPolicy)];
      for (const o of [role(pool), roleBinding(pool), ...policy]) {
        await this.objects.delete(o).catch((err: unknown) => {
          if (!notFound(err)) throw err;
        });
      }
    }
    this.timer.forget(keyOf(pool));
    await this.custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        namespace: meta.namespace!,
        name: meta.name!,
        body: {
          metadata: {
            finalizers: (meta.finalizers ?? []).filter((f) => f !== FINALIZER),
            resourceVersion: meta.resourceVersion,
          },
        },
      },
      MERGE,
    );
    this.d.log.info(
      { pool: keyOf(pool), labels: formatLabels(settings(pool).labels) },
      'pool deleted: agent deregistered',
    );
  }

  /** Writes the status subresource; a condition keeps its transition time while its status holds. */
  private async writeStatus(
    pool: AgentPool,
    fields: AgentPoolStatus,
    conditions: V1Condition[],
  ): Promise<void> {
    const before = pool.status?.conditions ?? [];
    const now = new Date();
    const merged = conditions.map((c) => {
      const old = before.find((b) => b.type === c.type);
      return {
        ...c,
        observedGeneration: pool.metadata!.generation,
        lastTransitionTime: old?.status === c.status ? old.lastTransitionTime : now,
      };
    });
    const status: AgentPoolStatus = {
      ...fields,
      selector: agentSelector(pool),
      observedGeneration: pool.metadata!.generation,
      conditions: merged,
    };
    await this.custom.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        namespace: pool.metadata!.namespace!,
        name: pool.metadata!.name!,
        body: { status },
      },
      MERGE,
    );
  }
}

function cond(type: string, status: boolean, reason: string, message: string): V1Condition {
  return { type, status: status ? 'True' : 'False', reason, message, lastTransitionTime: new Date() };
}
