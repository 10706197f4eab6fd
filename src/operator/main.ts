import os from 'node:os';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { createLogger, LOG_FORMATS } from '../telemetry/logger.ts';
import { startTracingFromEnv } from '../telemetry/tracing.ts';
import { z } from 'zod';
import { withSecrets } from '../secrets.ts';
import { Controller } from './controller.ts';
import { EventRecorder } from './events.ts';
import { LeaderElector } from './leader.ts';
import { health, OperatorMetrics, poolObserver } from './observe.ts';
import { TriadApi } from './triad-api.ts';
import { parseStepPolicy } from './step-policy.ts';

const envSchema = z.object({
  TRIAD_OPERATOR_SERVER: z.url(),
  TRIAD_OPERATOR_TOKEN: z.string().min(1, 'TRIAD_OPERATOR_TOKEN (a site administrator token) is required'),
  TRIAD_OPERATOR_NAMESPACE: z.string().min(1).optional(),
  // comma-separated: one controller per namespace; unset: the whole cluster
  TRIAD_OPERATOR_WATCH_NAMESPACE: z
    .string()
    .refine((v) => v.split(',').some((x) => x.trim() !== ''), 'names no namespace')
    .optional()
    .transform((v) =>
      v === undefined ? [] : [...new Set(v.split(',').map((x) => x.trim()))].filter((x) => x !== ''),
    ),
  POD_NAMESPACE: z.string().min(1).optional(),
  POD_NAME: z.string().min(1).optional(),
  TRIAD_OPERATOR_LEASE_NAME: z.string().min(1).default('triad-operator'),
  TRIAD_OPERATOR_LEASE_SECONDS: z.coerce.number().int().min(2).max(300).default(15),
  TRIAD_OPERATOR_RESYNC_SECONDS: z.coerce.number().positive().default(60),
  TRIAD_OPERATOR_SWEEP_GRACE_SECONDS: z.coerce.number().min(0).default(120),
  TRIAD_OPERATOR_STEP_NAMESPACES: z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== ''),
    ),
  TRIAD_OPERATOR_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9090),
  TRIAD_OPERATOR_STUCK_SECONDS: z.coerce.number().positive().default(300),
  // JSON {server, serverPort, dns}: each pool's step namespace gets a NetworkPolicy (step-policy.ts)
  TRIAD_OPERATOR_STEP_POLICY: z.string().optional(),
  LOG_LEVEL: z.string().default('info'),
  LOG_FORMAT: z.enum(LOG_FORMATS).default('auto'),
});

/**
 * `triad operator`: the AgentPool controller. Elects a leader through a Lease in its namespace
 * (TRIAD_OPERATOR_NAMESPACE, else the pod's, else `default`); the leader reconciles every pool of
 * the cluster, or of the namespaces of TRIAD_OPERATOR_WATCH_NAMESPACE (one controller each). It
 * talks to the Triad server at TRIAD_OPERATOR_SERVER only (never at a pool's `server`, which is
 * what the agents use), with a site administrator's token holding `agents:admin`. A replica that
 * loses the lease exits, so its restart starts clean as a follower. Every replica serves `/healthz`,
 * `/readyz` and `/metrics` on TRIAD_OPERATOR_METRICS_PORT (docs/operator.md#observing-the-operator).
 */
export function runOperator(given: NodeJS.ProcessEnv = process.env): void {
  const env = withSecrets(given);
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(
      `invalid operator configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  const e = parsed.data;
  const log = createLogger(e.LOG_LEVEL, { service: 'triad-operator', format: e.LOG_FORMAT });
  // OTEL_EXPORTER_OTLP_ENDPOINT: a span per reconcile (OTEL_SERVICE_NAME, default triad-operator)
  const tracing = startTracingFromEnv(env, 'triad-operator', log);
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const api = new TriadApi(e.TRIAD_OPERATOR_SERVER, e.TRIAD_OPERATOR_TOKEN);
  const identity = e.POD_NAME ?? `${os.hostname()}-${process.pid}`;
  const metrics = new OperatorMetrics();
  const events = new EventRecorder(kc.makeApiClient(CoreV1Api), identity, log);
  const watched = e.TRIAD_OPERATOR_WATCH_NAMESPACE;
  const stepPolicy = parseStepPolicy(e.TRIAD_OPERATOR_STEP_POLICY);
  const observer = poolObserver(metrics, events);
  const controllers = (watched.length === 0 ? [undefined] : watched).map(
    (namespace) =>
      new Controller(kc, api, log, {
        resyncMs: e.TRIAD_OPERATOR_RESYNC_SECONDS * 1000,
        sweepGraceMs: e.TRIAD_OPERATOR_SWEEP_GRACE_SECONDS * 1000,
        namespace,
        stepNamespaces: e.TRIAD_OPERATOR_STEP_NAMESPACES,
        stepPolicy,
        observer,
        metrics,
      }),
  );
  const leaseSeconds = e.TRIAD_OPERATOR_LEASE_SECONDS;
  const elector = new LeaderElector(
    kc,
    {
      namespace: e.TRIAD_OPERATOR_NAMESPACE ?? e.POD_NAMESPACE ?? 'default',
      name: e.TRIAD_OPERATOR_LEASE_NAME,
      identity,
      leaseSeconds,
      retryMs: Math.max(500, Math.floor((leaseSeconds * 1000) / 3)),
    },
    log,
    () => {
      metrics.leader.set(1);
      Promise.all(controllers.map((c) => c.start())).catch((err: unknown) => {
        log.error({ err }, 'controller failed to start');
        process.exit(1);
      });
    },
    () => {
      log.error('lost leadership: exiting');
      process.exit(1);
    },
  );
  elector.start();
  const stuckMs = e.TRIAD_OPERATOR_STUCK_SECONDS * 1000;
  const probe = () =>
    health(
      {
        // the oldest reconcile under way among the controllers (one per watched namespace)
        reconcilingSince: controllers.reduce<number | undefined>(
          (oldest, c) =>
            c.reconcilingSince === undefined || (oldest !== undefined && oldest <= c.reconcilingSince)
              ? oldest
              : c.reconcilingSince,
          undefined,
        ),
        electionTick: elector.lastRound,
        synced: controllers.every((c) => c.synced),
        leader: elector.isLeader,
        electionOk: elector.lastRoundOk,
      },
      Date.now(),
      stuckMs,
    );
  metrics.serve(e.TRIAD_OPERATOR_METRICS_PORT, probe).then(
    () => log.info({ port: metrics.port }, 'serving /healthz, /readyz and /metrics'),
    (err: unknown) => {
      log.error({ err, port: e.TRIAD_OPERATOR_METRICS_PORT }, 'cannot serve /healthz, /readyz and /metrics');
      process.exit(1);
    },
  );
  log.info({ identity, server: api.server, namespaces: watched }, 'Triad operator started');
  const stop = (signal: string) => {
    log.info({ signal }, 'stopping');
    void Promise.all([...controllers.map((c) => c.stop()), elector.stop(), metrics.close()])
      .then(() => tracing)
      .then((t) => t?.shutdown())
      .finally(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
