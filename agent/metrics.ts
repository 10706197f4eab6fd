import client from 'prom-client';
import { ProbeServer } from '../src/telemetry/probe-server.ts';

/**
 * The agent's own metrics (its registry, with the process's default metrics) and the small HTTP
 * server that serves them with `/healthz`.
 */
export class AgentMetrics {
  readonly registry = new client.Registry();
  private readonly probes = new ProbeServer(this.registry);
  readonly capacity;
  readonly running;
  readonly polls;
  readonly steps;
  readonly logBytes;

  constructor(capacity: number) {
    const registers = [this.registry];
    client.collectDefaultMetrics({ register: this.registry, prefix: 'triad_agent_process_' });
    this.capacity = new client.Gauge({
      name: 'triad_agent_capacity',
      help: 'Pipelines this agent runs at once',
      registers,
    });
    this.running = new client.Gauge({
      name: 'triad_agent_running',
      help: 'Pipelines running now',
      registers,
    });
    this.polls = new client.Counter({
      name: 'triad_agent_polls_total',
      help: 'Polls by result (job, empty, error)',
      labelNames: ['result'],
      registers,
    });
    this.steps = new client.Histogram({
      name: 'triad_agent_step_duration_seconds',
      help: 'Step durations by status',
      labelNames: ['status'],
      buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
      registers,
    });
    this.logBytes = new client.Counter({
      name: 'triad_agent_log_bytes_shipped_total',
      help: 'Log bytes acknowledged by the server',
      registers,
    });
    this.capacity.set(capacity);
  }

  /** The port `/metrics` and `/healthz` are served on (undefined: not serving). */
  get port(): number | undefined {
    return this.probes.port;
  }

  serve(port: number): Promise<void> {
    return this.probes.listen(port, { '/healthz': () => [] });
  }

  close(): Promise<void> {
    return this.probes.close();
  }
}
