import type { Logger } from 'pino';
import type { QueueFigures, RegisteredAgent, TriadApi } from './triad-api.ts';
import { LABEL_POOL, type AgentPool } from './types.ts';

/**
 * The agent pods' label selector as a string (`status.selector`, what the `scale` subresource
 * gives autoscalers): the agents Deployment's own selector (resources.ts).
 */
export function agentSelector(pool: AgentPool): string {
  return `${LABEL_POOL}=${pool.metadata!.name!},app.kubernetes.io/component=agent`;
}

/**
 * Replicas the work asks for: `clamp(max(ceil((pending + running) / capacity), busy), min, max)`.
 * `busy` is the number of live agents running a pipeline now: the running pipelines may be spread
 * one per agent, so the pool never goes below it (a scale-down then only removes idle agents).
 */
export function wantedReplicas(
  f: { pending: number; running: number },
  p: { capacity: number; min: number; max: number },
  busy = 0,
): number {
  const need = Math.max(Math.ceil((f.pending + f.running) / Math.max(1, p.capacity)), busy);
  return Math.min(p.max, Math.max(p.min, need));
}

/** The agent's live instances that run at least one pipeline. */
export function busyInstances(agent: RegisteredAgent): number {
  return agent.instances.filter((i) => i.live && i.running_pipelines.length > 0).length;
}

/**
 * Scale-up at once; scale-down only once the work has asked for fewer replicas for the whole
 * delay (a burst that comes back within it keeps the agents). Returns the replicas to set and,
 * while a scale-down waits, when to look again and when (epoch ms) it will happen.
 */
export class ScaleDownTimer {
  private readonly lowSince = new Map<string, number>();

  decide(
    key: string,
    wanted: number,
    current: number,
    delayMs: number,
    now = Date.now(),
  ): { replicas: number; recheckInMs?: number; downAt?: number } {
    if (wanted >= current) {
      this.lowSince.delete(key);
      return { replicas: wanted };
    }
    const since = this.lowSince.get(key) ?? now;
    this.lowSince.set(key, since);
    const left = since + delayMs - now;
    if (left <= 0) {
      this.lowSince.delete(key);
      return { replicas: wanted };
    }
    return { replicas: current, recheckInMs: left, downAt: since + delayMs };
  }

  forget(key: string): void {
    this.lowSince.delete(key);
  }
}

/**
 * Follows the queue figures of one label set through the server's long-poll (`since` + `wait`),
 * calling `changed` whenever they change; retries with a growing pause while the server fails.
 */
export class QueueWatcher {
  private readonly stop = new AbortController();
  figures: QueueFigures | undefined;
  error: string | undefined;

  private readonly api: TriadApi;
  readonly labelsKey: string;
  private readonly labels: Record<string, string>;
  private readonly changed: () => void;
  private readonly log: Logger;

  constructor(
    api: TriadApi,
    labelsKey: string,
    labels: Record<string, string>,
    changed: () => void,
    log: Logger,
  ) {
    this.api = api;
    this.labelsKey = labelsKey;
    this.labels = labels;
    this.changed = changed;
    this.log = log;
  }

  start(): void {
    void this.loop();
  }

  close(): void {
    this.stop.abort();
  }

  private async loop(): Promise<void> {
    let pause = 500;
    while (!this.stop.signal.aborted) {
      try {
        const f = await this.api.queue(this.labels, this.figures?.version, 30, this.stop.signal);
        pause = 500;
        const was = this.error;
        this.error = undefined;
        if (f.version !== this.figures?.version || was !== undefined) {
          this.figures = f;
          this.changed();
        }
      } catch (err) {
        if (this.stop.signal.aborted) return;
        const message = err instanceof Error ? err.message : String(err);
        if (this.error !== message) {
          this.error = message;
          this.log.warn({ labels: this.labelsKey, err: message }, 'queue watch failed; retrying');
          this.changed();
        }
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 10_000);
      }
    }
  }
}
