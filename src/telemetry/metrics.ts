import client from 'prom-client';

/**
 * One registry per server instance (tests run several servers in one process).
 * Features add their own metrics to `registry`.
 */
export class Metrics {
  readonly registry = new client.Registry();
  readonly httpDuration: client.Histogram<'method' | 'route' | 'status'>;
  /** Whether this replica exports the cluster-wide gauges now (`clusterGauge`); see `electWith`. */
  private leads: () => Promise<boolean> = () => Promise.resolve(true);

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

  /** A gauge with labels whose `collect` sets the value of each label set. */
  labelledGauge<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    collect: (set: (labels: Record<L, string>, value: number) => void) => Promise<void>,
  ): client.Gauge<L> {
    return new client.Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        await collect((labels, value) => this.set(labels as client.LabelValues<L>, value));
      },
    });
  }

  counter<L extends string>(name: string, help: string, labelNames: readonly L[]): client.Counter<L> {
    return new client.Counter({ name, help, labelNames, registers: [this.registry] });
  }

  histogram<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    buckets: number[],
  ): client.Histogram<L> {
    return new client.Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
  }

  /**
   * A gauge read from the database that is the same on every replica (a queue's length, a lag):
   * exported only while this replica is the one elected for the cluster-wide gauges (`electWith`),
   * so a sum over the replicas counts it once. Elsewhere the gauge has no sample (and `collect`
   * does not run).
   */
  clusterGauge(name: string, help: string, collect: () => Promise<number> | number): void {
    const leads = () => this.leads();
    const metric = {
      name,
      help,
      type: 'gauge',
      aggregator: 'first',
      reset: () => undefined,
      async get() {
        const values = (await leads()) ? [{ value: await collect(), labels: {} }] : [];
        return { name, help, type: 'gauge', values, aggregator: 'first' };
      },
    };
    this.registry.registerMetric(metric as unknown as client.Metric);
  }

  /** How this replica learns whether it exports the cluster-wide gauges (default: always). */
  electWith(leads: () => Promise<boolean>): void {
    this.leads = leads;
  }
}
