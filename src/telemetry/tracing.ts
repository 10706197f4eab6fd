import { context, propagation, trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { setTracing } from './spans.ts';

export type Tracing = {
  /** Exports what is still buffered, then turns tracing off in this process again. */
  shutdown: () => Promise<void>;
};

export type TracingOptions = {
  /** Milliseconds spans wait in the batch before an export (default 5000, `OTEL_BSP_SCHEDULE_DELAY`). */
  scheduledDelayMillis?: number;
};

/**
 * Starts OpenTelemetry tracing when an OTLP endpoint is configured (OTLP/HTTP with JSON bodies,
 * `<endpoint>/v1/traces`); otherwise tracing stays off and costs next to nothing (the SDK is not even
 * loaded, every span helper answers at once). Registers, for this process: a tracer provider with a
 * batch processor, an AsyncLocalStorage context manager (the active span follows async calls) and
 * the W3C trace-context propagator (`traceparent`). `shutdown` flushes and unregisters them, so a
 * process (a test) may start tracing again later.
 *
 * The spans are Triad's own (spans.ts and the seams that use it), not automatic instrumentation:
 * the code is ESM, and instrumenting third-party ESM modules needs loader hooks registered before
 * they load, which neither `node src/cli.ts` nor several servers in one test process can promise.
 */
export async function startTracing(
  endpoint: string | undefined,
  serviceName: string,
  log: Logger,
  opts: TracingOptions = {},
): Promise<Tracing | undefined> {
  if (endpoint === undefined) return undefined;
  const [{ TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { AsyncLocalStorageContextManager }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/context-async-hooks'),
    ]);
  const [{ W3CTraceContextPropagator }, { defaultResource, resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/core'),
    import('@opentelemetry/resources'),
  ]);
  const url = endpoint.endsWith('/v1/traces') ? endpoint : `${endpoint.replace(/\/+$/, '')}/v1/traces`;
  const envDelay = Number(process.env.OTEL_BSP_SCHEDULE_DELAY);
  const delay = opts.scheduledDelayMillis ?? (Number.isFinite(envDelay) && envDelay > 0 ? envDelay : 5000);
  const processor = new BatchSpanProcessor({
    exporter: new OTLPTraceExporter({ url }),
    scheduledDelayMillis: delay,
  });
  const provider = new TracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': serviceName })),
    spanProcessors: [processor],
  });
  if (!trace.setGlobalTracerProvider(provider)) {
    // another tracer is registered in this process already (two servers in one test): leave it
    log.warn('OpenTelemetry tracing already runs in this process; this one adds no tracer');
    await provider.shutdown();
    return undefined;
  }
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  setTracing(true);
  log.info({ endpoint: url, serviceName }, 'OpenTelemetry tracing started');
  let done: Promise<void> | undefined;
  return {
    shutdown: () =>
      (done ??= (async () => {
        try {
          await provider.shutdown();
        } finally {
          setTracing(false);
          trace.disable();
          context.disable();
          propagation.disable();
        }
      })()),
  };
}

/**
 * For the agent and the operator: tracing as the server starts it, from `OTEL_EXPORTER_OTLP_ENDPOINT`
 * and `OTEL_SERVICE_NAME` (default `service`). A failure to start is logged; the process runs untraced.
 */
export function startTracingFromEnv(
  env: NodeJS.ProcessEnv,
  service: string,
  log: Logger,
): Promise<Tracing | undefined> {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const name = env.OTEL_SERVICE_NAME?.trim();
  return startTracing(
    endpoint === '' ? undefined : endpoint,
    name === undefined || name === '' ? service : name,
    log,
  ).catch((err: unknown) => {
    log.error({ err }, 'OpenTelemetry tracing could not start; running without it');
    return undefined;
  });
}
