import client from 'prom-client';

/**
 * One registry per server instance (tests run several servers in one process).
 * Features add their own metrics to `registry`.
 */
export class Metrics {
  readonly registry = new client.Registry();
  readonly httpDuration: client.Histogram<'method' | 'route' | 'status'>;

  constructor() {
    client.collectDefaultMetrics({ register: this.registry, prefix: 'triad_' });
    this.httpDuration = new client.Histogram({
      name: 'triad_http_request_duration_seconds',
      help: 'HTTP request duration by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
  }

  gauge(name: string, help: string, collect: () => Promise<number> | number): client.Gauge {
    return new client.Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        this.set(await collect());
      },
    });
  }

  counter<L extends string>(name: string, help: string, labelNames: readonly L[]): client.Counter<L> {
    return new client.Counter({ name, help, labelNames, registers: [this.registry] });
  }
}
