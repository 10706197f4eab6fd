/**
 * One watch over this agent instance's step pods and one over the Pod Events of the step namespace,
 * shared by every step the executor runs: a step waits on its pod's state in this cache instead of
 * reading the pod every second. The watches run while a step is followed (and a few seconds after,
 * for the next step of the pipeline); a watch that breaks is started again (from where it was, or
 * with a fresh list when the API server no longer has that point), and while the pod watch is not
 * connected the executor reads pods directly.
 */
import {
  CoreV1Api,
  ListWatch,
  Watch,
  type CoreV1Event,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { Cancelled, abortable, isStatus } from './kubernetes-io.ts';

export type PodWatchOptions = {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Label selector of the pods to watch (this agent instance's). */
  labelSelector: string;
  /** How long the watches stay after the last step is done. */
  lingerMs?: number;
  /** How long current() waits for a new pod to reach the cache before reading it. */
  pollMs: number;
  /** current() reads the pod at least this often, whatever the cache says. */
  resyncMs: number;
  warn: (message: string, err?: unknown) => void;
};

/** A pod a step follows, and when the step last read it from the API server. */
export type PodRef = { name: string; read: number };

/**
 * A Watch that knows whether its request is open, and passes on only events with an object (a
 * server answering a watch with something else must not break the informer).
 */
class GuardedWatch extends Watch {
  open = false;
  /** The API server ends each watch after this long (the informer watches on from there). */
  static readonly SERVER_TIMEOUT_S = 300;

  constructor(kc: KubeConfig) {
    super(kc);
    // client-node drops a watch quiet for 30 s; step pods are quiet for minutes while they run
    // (a private field in its types, a plain one at run time)
    Object.assign(this, { requestTimeoutMs: (GuardedWatch.SERVER_TIMEOUT_S + 30) * 1000 });
  }

  override async watch(
    path: string,
    query: Parameters<Watch['watch']>[1],
    callback: Parameters<Watch['watch']>[2],
    done: Parameters<Watch['watch']>[3],
  ): Promise<AbortController> {
    const ctrl = await super.watch(
      path,
      { ...query, timeoutSeconds: GuardedWatch.SERVER_TIMEOUT_S, allowWatchBookmarks: true },
      (phase, obj: unknown, w) => {
        if (typeof obj === 'object' && obj !== null) callback(phase, obj, w);
      },
      (err: unknown) => {
        this.open = false;
        done(err);
      },
    );
    this.open = !ctrl.signal.aborted;
    return ctrl;
  }
}

type Informer<T> = {
  lw: ListWatch<T & { metadata?: { name?: string } }>;
  watch: GuardedWatch;
  delay: number;
};

export class PodWatch {
  private readonly core: CoreV1Api;
  private readonly o: Required<PodWatchOptions>;
  private pods: Informer<V1Pod> | undefined;
  private events: Informer<CoreV1Event> | undefined;
  /** Events by pod name, then by event uid. */
  private readonly byPod = new Map<string, Map<string, CoreV1Event>>();
  /** Pods that steps follow, and those of them this watch saw deleted. */
  private readonly followed = new Set<string>();
  private readonly deleted = new Set<string>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private users = 0;
  private linger: NodeJS.Timeout | undefined;
  private warnedEvents = false;

  constructor(opts: PodWatchOptions) {
    this.o = { lingerMs: 5000, ...opts };
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
  }

  /**
   * Starts the watches (unless running) for a step following pod `name`; call the returned
   * function when the step is done with it.
   */
  use(name: string): () => void {
    this.users += 1;
    this.followed.add(name);
    clearTimeout(this.linger);
    this.linger = undefined;
    if (this.pods === undefined) this.start();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.users -= 1;
      this.followed.delete(name);
      this.byPod.delete(name);
      this.deleted.delete(name);
      if (this.users > 0) return;
      this.linger = setTimeout(() => this.stop(), this.o.lingerMs);
      this.linger.unref();
    };
  }

  /** Whether the pod watch is listed and connected (so the cache can be trusted). */
  get synced(): boolean {
    return this.pods?.watch.open === true;
  }

  /** The cached pod; 'deleted' once the watch saw it go; undefined when not (yet) in the cache. */
  pod(name: string): V1Pod | 'deleted' | undefined {
    if (this.deleted.has(name)) return 'deleted';
    return this.pods?.lw.get(name, this.o.namespace);
  }

  /** The Events seen for the pod, in no particular order. */
  eventsOf(name: string): CoreV1Event[] {
    return [...(this.byPod.get(name)?.values() ?? [])];
  }

  /** How many changed() calls wait now (for all pods). */
  get waiting(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /** Resolves when the pod or its events change, after `ms`, or rejects with Cancelled on abort. */
  changed(name: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new Cancelled());
      const set = this.waiters.get(name) ?? new Set();
      this.waiters.set(name, set);
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener('abort', onAbort);
        set.delete(onChange);
        if (set.size === 0 && this.waiters.get(name) === set) this.waiters.delete(name);
      };
      const onAbort = () => {
        done();
        reject(new Cancelled());
      };
      const t = setTimeout(() => {
        done();
        resolve();
      }, ms);
      const onChange = () => {
        done();
        resolve();
      };
      set.add(onChange);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * The pod as the cache has it (undefined once deleted); read from the API server when the pod
   * watch is not connected, when the cache does not have the pod a moment after it was made, and
   * every resyncMs. `ctx.read` is when this pod was last read.
   */
  async current(ctx: PodRef, signal: AbortSignal): Promise<V1Pod | undefined> {
    const cached = this.pod(ctx.name);
    if (cached === 'deleted') return undefined;
    const fresh = Date.now() - ctx.read < this.o.resyncMs;
    if (cached !== undefined && this.synced && fresh) return cached;
    if (cached === undefined && this.synced && fresh) {
      await this.changed(ctx.name, this.o.pollMs, signal);
      const again = this.pod(ctx.name);
      if (again === 'deleted') return undefined;
      if (again !== undefined) return again;
    }
    ctx.read = Date.now();
    try {
      const namespace = this.o.namespace;
      return await abortable(this.core.readNamespacedPod({ name: ctx.name, namespace }), signal);
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  private wake(name: string): void {
    for (const w of [...(this.waiters.get(name) ?? [])]) w();
  }

  private start(): void {
    const ns = this.o.namespace;
    const [podWatch, eventWatch] = [new GuardedWatch(this.o.kubeConfig), new GuardedWatch(this.o.kubeConfig)];
    const podPath = `/api/v1/namespaces/${ns}/pods`;
    const pods = new ListWatch<V1Pod>(
      podPath,
      podWatch,
      () => this.core.listNamespacedPod({ namespace: ns, labelSelector: this.o.labelSelector }),
      false,
      this.o.labelSelector,
    );
    const onPod = (p: V1Pod) => this.wake(p.metadata?.name ?? '');
    pods.on('add', onPod);
    pods.on('update', onPod);
    pods.on('delete', (p: V1Pod) => {
      const name = p.metadata?.name ?? '';
      if (this.followed.has(name)) this.deleted.add(name);
      this.wake(name);
    });
    const eventSelector = 'involvedObject.kind=Pod';
    const events = new ListWatch<CoreV1Event>(
      `/api/v1/namespaces/${ns}/events`,
      eventWatch,
      () => this.core.listNamespacedEvent({ namespace: ns, fieldSelector: eventSelector }),
      false,
      undefined,
      eventSelector,
    );
    // indexed by pod (the informer holds them anyway), whichever list comes first
    const key = (e: CoreV1Event) => e.metadata.uid ?? `${e.metadata.name}`;
    const onEvent = (e: CoreV1Event) => {
      const name = e.involvedObject.name ?? '';
      const m = this.byPod.get(name) ?? new Map<string, CoreV1Event>();
      m.set(key(e), e);
      this.byPod.set(name, m);
      this.wake(name);
    };
    events.on('add', onEvent);
    events.on('update', onEvent);
    events.on('delete', (e: CoreV1Event) => {
      const m = this.byPod.get(e.involvedObject.name ?? '');
      m?.delete(key(e));
      if (m?.size === 0) this.byPod.delete(e.involvedObject.name ?? '');
    });
    this.pods = { lw: pods, watch: podWatch, delay: 500 };
    this.events = { lw: events, watch: eventWatch, delay: 500 };
    this.run(this.pods, 'step pods');
    this.run(this.events, 'pod events');
  }

  /** Runs an informer, starting it again after an error (with a growing delay) while in use. */
  private run<T>(inf: Informer<T>, what: string): void {
    inf.lw.on('add', () => {
      inf.delay = 500;
    });
    inf.lw.on('error', (err: unknown) => {
      if (!this.isLive(inf)) return; // stopped
      if (what === 'pod events' && !this.warnedEvents) {
        this.warnedEvents = true;
        this.o.warn(`watching ${what} failed (retrying; steps carry on without them)`, err);
      }
      const t = setTimeout(() => {
        if (this.isLive(inf)) void this.startInformer(inf);
      }, inf.delay);
      t.unref();
      inf.delay = Math.min(inf.delay * 2, 30_000);
    });
    void this.startInformer(inf);
  }

  private async startInformer<T>(inf: Informer<T>): Promise<void> {
    try {
      // resolves once listed (when needed) and the watch request is open, or after an error
      // (reported to the error handler, which starts it again)
      await inf.lw.start();
      // what changed while the watch was down (the list) may have a waiter: wake them all
      for (const name of [...this.waiters.keys()]) this.wake(name);
    } catch (err) {
      this.o.warn('starting a watch failed', err);
    }
  }

  private isLive(inf: object): boolean {
    return inf === this.pods || inf === this.events;
  }

  private stop(): void {
    if (this.users > 0) return;
    const [pods, events] = [this.pods, this.events];
    this.pods = undefined;
    this.events = undefined;
    this.byPod.clear();
    this.deleted.clear();
    void pods?.lw.stop();
    void events?.lw.stop();
  }
}
