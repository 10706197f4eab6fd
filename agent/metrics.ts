import http from 'node:http';
import client from 'prom-client';

/**
 * The agent's own metrics (its registry, with the process's default metrics) and the small HTTP
 * server that serves them with `/healthz`.
 */
export class AgentMetrics {
  readonly registry = new client.Registry();
  private server: http.Server | undefined;
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
    const a = this.server?.address();
    return a !== null && typeof a === 'object' ? a.port : undefined;
  }

  async serve(port: number): Promise<void> {
    this.server = http.createServer((req, res) => {
      if (req.url === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok' }));
      } else if (req.url === '/metrics') {
        this.registry.metrics().then(
          (text) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
          () => res.writeHead(500).end(),
        );
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => this.server!.listen(port, resolve));
  }

  close(): Promise<void> {
    return new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
