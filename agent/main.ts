import os from 'node:os';
import { z } from 'zod';
import { createLogger, LOG_FORMATS } from '../src/telemetry/logger.ts';
import { startTracingFromEnv } from '../src/telemetry/tracing.ts';
import { Agent } from './agent.ts';
import { stepMaximum } from './step-resources.ts';
import { LocalExecutor } from './executors/local.ts';
import { sandboxEnvShape, sandboxOptions } from './executors/sandbox.ts';
import type { Executor } from './types.ts';
import { withSecrets } from '../src/secrets.ts';
import { formatLabels, parseLabelQuery } from '../src/pipelines/labels.ts';
import { bytesQuantity, quantityProblem } from '../src/pipelines/quantity.ts';

/** A quantity variable (the pool's maximum per step); an empty value counts as unset. */
const maxQuantity = (key: 'cpu' | 'memory') =>
  z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()))
    .superRefine((v, ctx) => {
      const problem = v === undefined ? undefined : quantityProblem(key, v);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    });

const envSchema = z.object({
  TRIAD_AGENT_SERVER: z.url().default('http://localhost:3000'),
  TRIAD_AGENT_TOKEN: z.string().min(1, 'TRIAD_AGENT_TOKEN is required'),
  TRIAD_AGENT_INSTANCE: z.string().min(1).optional(),
  POD_NAME: z.string().min(1).optional(),
  TRIAD_AGENT_LABELS: z
    .string()
    .default('')
    .refine((v) => {
      try {
        parseLabelQuery(v);
        return true;
      } catch {
        return false;
      }
    }, 'must be key=value pairs separated by commas (Kubernetes label syntax)'),
  TRIAD_AGENT_CAPACITY: z.coerce.number().int().min(1).max(256).default(2),
  TRIAD_AGENT_EXECUTOR: z.enum(['local', 'kubernetes']).optional(),
  KUBERNETES_SERVICE_HOST: z.string().optional(),
  TRIAD_AGENT_DRAIN_SECONDS: z.coerce.number().min(0).default(60),
  TRIAD_AGENT_POLL_WAIT: z.coerce.number().int().min(0).max(30).default(30),
  TRIAD_AGENT_HEARTBEAT_SECONDS: z.coerce.number().positive().default(10),
  TRIAD_AGENT_METRICS_PORT: z
    .union([z.literal('off'), z.coerce.number().int().min(0).max(65535)])
    .default(9090),
  TRIAD_AGENT_WORK_DIR: z.string().optional(),
  /** The most one step may ask for in its `resources` (an AgentPool's `spec.steps.maxResources`). */
  TRIAD_AGENT_MAX_CPU: maxQuantity('cpu'),
  TRIAD_AGENT_MAX_MEMORY: maxQuantity('memory'),
  LOG_LEVEL: z.string().default('info'),
  LOG_FORMAT: z.enum(LOG_FORMATS).default('auto'),
  ...sandboxEnvShape,
});

async function executorFor(
  kind: 'local' | 'kubernetes',
  env: NodeJS.ProcessEnv,
  e: z.output<typeof envSchema>,
): Promise<Executor> {
  if (kind === 'kubernetes') {
    const { kubernetesExecutorFromEnv } = await import('./executors/kubernetes.ts');
    return kubernetesExecutorFromEnv(env);
  }
  const { unsandboxed, ...sandbox } = sandboxOptions(e);
  const local = new LocalExecutor({
    ...(e.TRIAD_AGENT_WORK_DIR === undefined ? {} : { workDir: e.TRIAD_AGENT_WORK_DIR }),
    sandbox,
    unsandboxed,
  });
  // Refuse to run repositories' code without isolation, unless explicitly told to.
  await local.probe().catch((err: unknown) => {
    throw new Error(
      `the local executor cannot sandbox steps here: ${err instanceof Error ? err.message : String(err)}. ` +
        'Install bubblewrap, use the kubernetes executor, or set TRIAD_AGENT_LOCAL_UNSANDBOXED=true ' +
        '(dangerous: steps then run as this user and can read everything it can)',
      { cause: err },
    );
  });
  return local;
}

/** `triad agent`: configuration from the environment, SIGTERM/SIGINT drain, exit 0. */
export async function runAgent(given: NodeJS.ProcessEnv = process.env): Promise<void> {
  // The agent token leaves process.env (no child process inherits it); it is read from here.
  const env = withSecrets(given);
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(
      `invalid agent configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  const e = parsed.data;
  const log = createLogger(e.LOG_LEVEL, { service: 'triad-agent', format: e.LOG_FORMAT });
  // OTEL_EXPORTER_OTLP_ENDPOINT: a span per pipeline and step (OTEL_SERVICE_NAME, default triad-agent)
  const tracing = await startTracingFromEnv(env, 'triad-agent', log);
  const kind = e.TRIAD_AGENT_EXECUTOR ?? (e.KUBERNETES_SERVICE_HOST !== undefined ? 'kubernetes' : 'local');
  const instance = e.TRIAD_AGENT_INSTANCE ?? e.POD_NAME ?? os.hostname();
  const agent = new Agent({
    server: e.TRIAD_AGENT_SERVER,
    token: e.TRIAD_AGENT_TOKEN,
    instance,
    capacity: e.TRIAD_AGENT_CAPACITY,
    labels: formatLabels(parseLabelQuery(e.TRIAD_AGENT_LABELS)),
    executor: await executorFor(kind, env, e),
    log,
    pollWait: e.TRIAD_AGENT_POLL_WAIT,
    heartbeatMs: e.TRIAD_AGENT_HEARTBEAT_SECONDS * 1000,
    drainMs: e.TRIAD_AGENT_DRAIN_SECONDS * 1000,
    metricsPort: e.TRIAD_AGENT_METRICS_PORT === 'off' ? undefined : e.TRIAD_AGENT_METRICS_PORT,
    // by default a step may not ask for more than the sandbox's or the pool's limits
    maxResources: stepMaximum(
      kind,
      { cpu: e.TRIAD_AGENT_MAX_CPU, memory: e.TRIAD_AGENT_MAX_MEMORY },
      {
        sandboxMemory: bytesQuantity(e.TRIAD_AGENT_SANDBOX_MEMORY),
        cpuLimit: env.TRIAD_AGENT_CPU_LIMIT,
        memoryLimit: env.TRIAD_AGENT_MEMORY_LIMIT,
      },
    ),
  });
  if (kind === 'local' && e.TRIAD_AGENT_LOCAL_UNSANDBOXED) {
    log.warn('TRIAD_AGENT_LOCAL_UNSANDBOXED=true: steps run WITHOUT a sandbox, as this user');
  }
  await agent.start();
  log.info(
    {
      server: e.TRIAD_AGENT_SERVER,
      instance,
      executor: kind,
      sandboxed: kind === 'local' ? !e.TRIAD_AGENT_LOCAL_UNSANDBOXED : undefined,
      capacity: e.TRIAD_AGENT_CAPACITY,
      labels: e.TRIAD_AGENT_LABELS,
      metricsPort: agent.port,
    },
    'Triad agent started',
  );
  const stop = (signal: string) => {
    log.info({ signal, running: agent.runningCount }, 'stopping: no new pipelines; draining');
    agent.stop().then(
      async () => {
        log.info('agent stopped');
        await tracing?.shutdown().catch(() => undefined);
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'agent stop failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
