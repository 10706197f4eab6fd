import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
} from '@opentelemetry/api';

/**
 * Triad's spans. Every helper here answers at once, without touching the OpenTelemetry API, while
 * tracing is off (tracing.ts turns it on): the seams that use them (HTTP, SQL, VCS processes, the
 * push lock, the outbox, webhooks, the blob store) cost a flag test then.
 */
let on = false;

/** Called by tracing.ts only. */
export function setTracing(enabled: boolean): void {
  on = enabled;
}

export function tracingOn(): boolean {
  return on;
}

export const TRACER_NAME = 'triad';

export function tracer() {
  return trace.getTracer(TRACER_NAME);
}

/** What `inSpan` gives its function when tracing is off (a span that records nothing). */
const OFF = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

export type SpanOptions = { kind?: SpanKind; attributes?: Attributes };

/**
 * Runs `fn` in a child span of the active one (a root span when none is active), which ends when
 * `fn` settles; a throw marks it as an error (and is rethrown).
 */
export async function inSpan<T>(name: string, opts: SpanOptions, fn: (span: Span) => Promise<T>): Promise<T> {
  if (!on) return fn(OFF);
  return tracer().startActiveSpan(name, opts, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      failed(span, e);
      throw e;
    } finally {
      span.end();
    }
  });
}

/** Marks `span` as failed by `e`. */
export function failed(span: Span, e: unknown): void {
  if (e instanceof Error) span.recordException(e);
  span.setStatus({ code: SpanStatusCode.ERROR, message: e instanceof Error ? e.message : String(e) });
}

/**
 * Adds `traceparent` (and `tracestate`) of the active span to `headers`, so the receiver continues
 * this trace; nothing when tracing is off or no span is active. Answers `headers`.
 */
export function injectTraceHeaders<H extends Record<string, string>>(headers: H): H {
  if (on) propagation.inject(context.active(), headers);
  return headers;
}

/** The trace and span ids of the active span, as log lines carry them (`trace_id`, `span_id`). */
export function traceFields(): { trace_id?: string; span_id?: string } {
  if (!on) return {};
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const c = span.spanContext();
  if (!trace.isSpanContextValid(c)) return {};
  return { trace_id: c.traceId, span_id: c.spanId };
}

export { SpanKind, SpanStatusCode, type Span };
