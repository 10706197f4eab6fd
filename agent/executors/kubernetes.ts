import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig, Log, type V1OwnerReference } from '@kubernetes/client-node';
import type { Executor, Job, StepResult, StepRun } from '../types.ts';
import {
  CLONE_CONTAINER,
  EXIT_CANCELLED,
  EXIT_NOT_STARTED,
  LABEL_PIPELINE,
  STEP_CONTAINER,
  ownedSelector,
  stepPod,
  stepPodState,
  workspaceClaimName,
  workspacePvc,
  type PodSpecOptions,
  type StepPodState,
} from './pod-spec.ts';
import { parseKubernetesEnv } from './kubernetes-env.ts';
import { Cancelled, abortable, describe, isStatus, sleep, streamLog, withTimeout } from './kubernetes-io.ts';
import { eventLines, pendingPause } from './pending-events.ts';
import { placeStep } from './placement.ts';
import { PodWatch, type PodRef } from './pod-watch.ts';

export { parseKubernetesEnv, SERVICEACCOUNT_NAMESPACE_FILE, type KubernetesEnv } from './kubernetes-env.ts';

const SERVICEACCOUNT_TOKEN_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/token';

export type KubernetesExecutorOptions = {
  kubeConfig: KubeConfig;
  pod: PodSpecOptions;
  /** A step pod that has not started this long (no container running) fails with exit code 125. */
  pendingTimeoutMs: number;
  /** How often a waiting step looks at its pod (in the pod watch's cache; read while it is down). */
  pollMs?: number;
  /** A step reads its pod itself at least this often, even when the watch says nothing changed. */
  resyncMs?: number;
  /** The agent's own pod (same namespace): made the owner of step pods and PVCs for garbage collection. */
  selfPod?: string | undefined;
  /** Called with problems that do not fail a step (a failed delete, a log stream that broke). */
  warn?: (message: string, err?: unknown) => void;
};

/**
 * Runs each step as a Kubernetes Pod (image = step image, commands by `sh -c`) sharing a
 * per-pipeline PVC workspace into which the first step's init container clones the repository.
 */
export class KubernetesExecutor implements Executor {
  readonly name = 'kubernetes';
  private readonly core: CoreV1Api;
  private readonly logs: Log;
  private readonly o: Required<Omit<KubernetesExecutorOptions, 'selfPod'>> & { selfPod: string | undefined };
  private owner: Promise<V1OwnerReference | undefined> | undefined;
  /** Pipelines between prepare and cleanup here: never swept, whatever snapshot the sweeper got. */
  private readonly live = new Set<number>();
  /** Step pods and their Events, watched while steps run. */
  private readonly watch: PodWatch;
  /** The node of each pipeline's first scheduled step pod (later steps follow it, see placement.ts). */
  private readonly nodes = new Map<number, string>();

  constructor(opts: KubernetesExecutorOptions) {
    this.o = { pollMs: 1000, resyncMs: 60_000, warn: () => undefined, ...opts, selfPod: opts.selfPod };
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
    this.logs = new Log(opts.kubeConfig);
    this.watch = new PodWatch({
      kubeConfig: opts.kubeConfig,
      namespace: opts.pod.namespace,
      labelSelector: ownedSelector(opts.pod.instance),
      pollMs: this.o.pollMs,
      resyncMs: this.o.resyncMs,
      warn: this.o.warn,
    });
  }

  get namespace(): string {
    return this.o.pod.namespace;
  }

  /** Pod options with the owner reference (the agent's pod, read once; none when unreadable). */
  private async podOptions(): Promise<PodSpecOptions> {
    const self = this.o.selfPod;
    if (self === undefined || this.o.pod.owner !== undefined) return this.o.pod;
    this.owner ??= this.core.readNamespacedPod({ name: self, namespace: this.namespace }).then(
      (p): V1OwnerReference | undefined =>
        p.metadata?.uid === undefined
          ? undefined
          : { apiVersion: 'v1', kind: 'Pod', name: self, uid: p.metadata.uid, controller: false },
      (err: unknown) => {
        this.o.warn(
          `cannot read the agent pod ${self}: step pods will not be garbage-collected with it`,
          err,
        );
        return undefined;
      },
    );
    const owner = await this.owner;
    return owner === undefined ? this.o.pod : { ...this.o.pod, owner };
  }

  async prepare(job: Job, signal: AbortSignal): Promise<void> {
    this.live.add(job.pipeline_id);
    const opts = await abortable(this.podOptions(), signal);
    try {
      await abortable(
        this.core.createNamespacedPersistentVolumeClaim({
          namespace: this.namespace,
          body: workspacePvc(job, opts),
        }),
        signal,
      );
    } catch (err) {
      if (isStatus(err, 409)) return; // made by an earlier attempt of this pipeline
      if (err instanceof Cancelled) throw err;
      throw new Error(
        `creating the workspace volume ${workspaceClaimName(job.pipeline_id)} failed: ${describe(err)}`,
        { cause: err },
      );
    }
  }

  async runStep(run: StepRun): Promise<StepResult> {
    const { job, step, signal } = run;
    const out = (s: string) => run.onOutput(Buffer.from(s));
    const opts = await this.podOptions();
    const built = stepPod(job, step, opts, randomBytes(3).toString('hex'), run.env);
    const body = placeStep(built, this.nodes.get(job.pipeline_id), opts.workspaceAccessMode);
    const name = body.metadata?.name ?? '';
    const creating = this.core.createNamespacedPod({ namespace: this.namespace, body });
    try {
      await abortable(creating, signal);
    } catch (err) {
      if (err instanceof Cancelled) {
        // The request may still create the pod after the cancellation: delete it once it exists.
        await withTimeout(
          creating.then(
            () => this.deletePod(name, 0),
            () => undefined,
          ),
          3000,
        ).catch(() => undefined);
        return { exitCode: EXIT_CANCELLED, reason: 'cancelled' };
      }
      throw new Error(`creating pod ${name} failed: ${describe(err)}`, { cause: err });
    }
    const release = this.watch.use(name);
    try {
      const result = await this.follow(name, run, out);
      await this.deletePod(name);
      return result;
    } catch (err) {
      if (err instanceof Cancelled || signal.aborted) {
        await this.deletePod(name, 0);
        return { exitCode: EXIT_CANCELLED, reason: 'cancelled' };
      }
      await this.deletePod(name);
      throw err;
    } finally {
      release();
    }
  }

  /** Waits for the step pod to start, follows its log, and reads its outcome. */
  private async follow(name: string, run: StepRun, out: (s: string) => void): Promise<StepResult> {
    const { signal } = run;
    const ctx: PodRef = { name, read: Date.now() };
    const said = new Set<string>();
    const gone = (): StepResult => {
      out(`[triad] pod ${name} was deleted before the step ended\n`);
      return { exitCode: EXIT_NOT_STARTED, reason: 'PodDeleted' };
    };
    // 1. Wait until the step container runs (or the pod ends), classifying why it does not start.
    const t0 = Date.now();
    let lastProgress = t0;
    let state: StepPodState;
    for (;;) {
      const pod = await this.watch.current(ctx, signal);
      if (pod === undefined) return gone();
      const node = pod.spec?.nodeName;
      if (node !== undefined && !this.nodes.has(run.job.pipeline_id))
        this.nodes.set(run.job.pipeline_id, node);
      state = stepPodState(pod);
      if (state.kind !== 'pending') break;
      // why it waits, from its Events (once each, unless it starts soon); a pull or scale-up stops the timer
      const events = this.watch.eventsOf(name);
      if (state.cloning || pendingPause(events) !== undefined) lastProgress = Date.now();
      const waited = Date.now() - lastProgress;
      const ending = state.problem?.fatal === true || waited >= this.o.pendingTimeoutMs;
      if (ending || Date.now() - t0 >= Math.min(5000, this.o.pendingTimeoutMs / 2))
        for (const line of eventLines(events, said, node !== undefined)) out(line);
      if (ending) {
        const why =
          state.problem === undefined
            ? 'Pending'
            : `${state.problem.reason}${state.problem.message === '' ? '' : `: ${state.problem.message}`}`;
        out(`[triad] pod ${name} did not start within ${Math.round(waited / 1000)} s: ${why}\n`);
        return { exitCode: EXIT_NOT_STARTED, reason: state.problem?.reason ?? 'PendingTimeout' };
      }
      await this.watch.changed(name, this.o.pollMs, signal);
    }
    if (state.kind === 'clone-failed') {
      await streamLog(
        this.logs,
        this.namespace,
        name,
        CLONE_CONTAINER,
        false,
        { seen: 0 },
        run.onOutput,
        signal,
      ).catch((err: unknown) => {
        if (err instanceof Cancelled) throw err;
        out(`[triad] could not read the clone log: ${describe(err)}\n`);
      });
      out(`[triad] cloning the repository failed (exit code ${state.exitCode})\n`);
      return { exitCode: state.exitCode, reason: 'CloneFailed' };
    }
    // 2. Follow the log while the container runs; a stream that ends early is reopened, and one
    //    that stays open after the container ended (a stalled connection, a node that does not
    //    close it) is closed, so the step ends with its pod and the final read gets the tail.
    const cursor = { seen: 0 };
    const pump = async (follow: boolean, until: AbortSignal = signal) => {
      try {
        await streamLog(this.logs, this.namespace, name, STEP_CONTAINER, follow, cursor, run.onOutput, until);
      } catch (err) {
        if (signal.aborted) throw new Cancelled();
        if (err instanceof Cancelled) return; // closed by closeWhenEnded
        // A follow answered 404: the pod went away meanwhile (deleted, swept); its state, read
        // next, tells the step's end.
        if (follow && isStatus(err, 404)) return;
        this.o.warn(`log stream of pod ${name} broke`, err);
      }
    };
    while (state.kind === 'running') {
      const following = new AbortController();
      const stopFollowing = () => following.abort();
      signal.addEventListener('abort', stopFollowing, { once: true });
      const watcher = this.closeWhenEnded(ctx, following);
      try {
        await pump(true, following.signal);
      } finally {
        stopFollowing();
        signal.removeEventListener('abort', stopFollowing);
        await watcher;
      }
      if (signal.aborted) throw new Cancelled();
      const pod = await this.watch.current(ctx, signal);
      if (pod === undefined) return gone();
      state = stepPodState(pod);
      if (state.kind === 'running') await this.watch.changed(name, this.o.pollMs, signal);
    }
    // 3. Ended: read the whole log once more and emit what the follow missed.
    if (state.kind === 'terminated' || state.kind === 'failed') await pump(false);
    switch (state.kind) {
      case 'terminated':
        if (state.reason === 'OOMKilled') {
          out(`\n[triad] the step was killed because it ran out of memory (OOMKilled)\n`);
          return { exitCode: state.exitCode, reason: 'OOMKilled' };
        }
        if (state.reason === 'DeadlineExceeded') {
          out(`\n[triad] the step exceeded its deadline of ${this.o.pod.deadlineSeconds} s\n`);
          return { exitCode: state.exitCode, reason: 'DeadlineExceeded' };
        }
        if (state.reason !== undefined && state.exitCode !== 0) {
          out(`\n[triad] ${state.reason}${state.message === undefined ? '' : `: ${state.message}`}\n`);
          return { exitCode: state.exitCode, reason: state.reason };
        }
        return { exitCode: state.exitCode };
      case 'failed':
        out(
          `\n[triad] pod ${name} failed: ${state.reason}${state.message === '' ? '' : `: ${state.message}`}\n`,
        );
        return { exitCode: state.exitCode, reason: state.reason };
      case 'clone-failed':
        out(`[triad] cloning the repository failed (exit code ${state.exitCode})\n`);
        return { exitCode: state.exitCode, reason: 'CloneFailed' };
      case 'pending':
        throw new Error(`unexpected pod state ${state.kind}`);
    }
  }

  /**
   * While a log follow is open: looks at the pod whenever the watch sees it change (at least every
   * poll) and, once its step container is no longer running (or the pod is gone), gives the stream
   * a moment to end by itself, then aborts `following`. Ends quietly when `following` is aborted by
   * anyone else.
   */
  private async closeWhenEnded(ctx: PodRef, following: AbortController): Promise<void> {
    try {
      for (;;) {
        await this.watch.changed(ctx.name, this.o.pollMs, following.signal);
        const pod = await this.watch.current(ctx, following.signal);
        if (pod === undefined || stepPodState(pod).kind !== 'running') {
          await sleep(Math.max(2 * this.o.pollMs, 1000), following.signal);
          following.abort();
          return;
        }
      }
    } catch {
      // aborted (the follow ended, or the step was cancelled) or the read failed: the loop in
      // follow() reads the pod again either way
    }
  }

  private async deletePod(name: string, gracePeriodSeconds?: number): Promise<void> {
    try {
      // Bounded, so that a cancelled step returns promptly even when the API server is slow.
      await withTimeout(
        this.core.deleteNamespacedPod({
          name,
          namespace: this.namespace,
          ...(gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds }),
        }),
        3000,
      );
    } catch (err) {
      if (!isStatus(err, 404)) this.o.warn(`deleting pod ${name} failed`, err);
    }
  }

  async cleanup(job: Job): Promise<void> {
    try {
      await this.deleteOwned((pipeline) => pipeline === String(job.pipeline_id), job.pipeline_id);
    } finally {
      this.live.delete(job.pipeline_id);
      this.nodes.delete(job.pipeline_id);
    }
  }

  async sweep(activePipelineIds: ReadonlySet<number>): Promise<void> {
    await this.deleteOwned((pipeline) => {
      const id = Number(pipeline);
      return !activePipelineIds.has(id) && !this.live.has(id);
    });
  }

  /** Deletes this agent's pods, then PVCs, whose pipeline label matches. */
  private async deleteOwned(match: (pipeline: string) => boolean, pipelineId?: number): Promise<void> {
    const labelSelector = ownedSelector(this.o.pod.instance, pipelineId);
    const ns = this.namespace;
    const problems: string[] = [];
    const pods = await this.core.listNamespacedPod({ namespace: ns, labelSelector });
    for (const p of pods.items) {
      const name = p.metadata?.name;
      const pipeline = p.metadata?.labels?.[LABEL_PIPELINE];
      if (name === undefined || pipeline === undefined || !match(pipeline)) continue;
      await this.core
        .deleteNamespacedPod({ name, namespace: ns, gracePeriodSeconds: 0 })
        .catch((err: unknown) => {
          if (!isStatus(err, 404)) problems.push(`pod ${name}: ${describe(err)}`);
        });
    }
    const claims = await this.core.listNamespacedPersistentVolumeClaim({ namespace: ns, labelSelector });
    for (const c of claims.items) {
      const name = c.metadata?.name;
      const pipeline = c.metadata?.labels?.[LABEL_PIPELINE];
      if (name === undefined || pipeline === undefined || !match(pipeline)) continue;
      await this.core.deleteNamespacedPersistentVolumeClaim({ name, namespace: ns }).catch((err: unknown) => {
        if (!isStatus(err, 404)) problems.push(`persistentvolumeclaim ${name}: ${describe(err)}`);
      });
    }
    if (problems.length > 0) throw new Error(`deleting failed: ${problems.join('; ')}`);
  }
}

/** The `kubernetes` executor configured from the environment (see the README's table). */
export function kubernetesExecutorFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  warn?: (message: string, err?: unknown) => void,
): KubernetesExecutor {
  const { options, inCluster, kubeconfigFiles } = parseKubernetesEnv(env);
  const kubeConfig = new KubeConfig();
  try {
    if (inCluster && fs.existsSync(SERVICEACCOUNT_TOKEN_FILE)) kubeConfig.loadFromCluster();
    else if (kubeconfigFiles.length > 0) {
      // Like `kubectl`: the first file's current context, clusters and users merged from all.
      kubeConfig.loadFromFile(kubeconfigFiles[0]!);
      for (const f of kubeconfigFiles.slice(1)) {
        const more = new KubeConfig();
        more.loadFromFile(f);
        kubeConfig.mergeConfig(more, true);
      }
    } else {
      const file = path.join(os.homedir(), '.kube', 'config');
      if (!fs.existsSync(file))
        throw new Error(`not in a pod, KUBECONFIG is unset and ${file} does not exist`);
      kubeConfig.loadFromFile(file);
    }
  } catch (err) {
    throw new Error(
      `kubernetes executor: cannot load the Kubernetes configuration: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  if (kubeConfig.getCurrentCluster() === null)
    throw new Error('kubernetes executor: the Kubernetes configuration has no current cluster');
  return new KubernetesExecutor({ ...options, kubeConfig, ...(warn === undefined ? {} : { warn }) });
}
