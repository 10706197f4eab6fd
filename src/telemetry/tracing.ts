import type { Logger } from 'pino';

export type Tracing = { shutdown: () => Promise<void> };

/**
 * Starts OpenTelemetry tracing through @opentelemetry/sdk-node when an OTLP endpoint is
 * configured; otherwise tracing stays off and costs nothing (the SDK is not even loaded).
 */
export async function startTracing(
  endpoint: string | undefined,
  serviceName: string,
  log: Logger,
): Promise<Tracing | undefined> {
  if (endpoint === undefined) return undefined;
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
  const url = endpoint.endsWith('/v1/traces') ? endpoint : `${endpoint.replace(/\/+$/, '')}/v1/traces`;
  const sdk = new NodeSDK({ serviceName, traceExporter: new OTLPTraceExporter({ url }) });
  sdk.start();
  log.info({ endpoint: url }, 'OpenTelemetry tracing started');
  return { shutdown: () => sdk.shutdown() };
}
