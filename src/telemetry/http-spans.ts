import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { tracer, tracingOn } from './spans.ts';

/**
 * The server span of one incoming request, or undefined while tracing is off. It continues the
 * trace of the request's `traceparent` (W3C trace context) when one came, is named
 * `<METHOD> <route pattern>` once the route is known (`end`), and is made the active span for
 * everything the request does (`run`).
 */
export type RequestSpan = {
  /** Runs `next` (the rest of the middleware chain) with this span active. */
  run(next: () => void): void;
  /** Ends the span with the route pattern (`/api/v1/repos/:org/:repo`) and the status sent. */
  end(route: string, status: number): void;
};

export function requestSpan(req: IncomingMessage, res: ServerResponse): RequestSpan | undefined {
  if (!tracingOn()) return undefined;
  const method = req.method ?? 'GET';
  const parent = propagation.extract(ROOT_CONTEXT, req.headers);
  const path = (req.url ?? '/').split('?', 1)[0]!;
  const span = tracer().startSpan(
    method,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': method,
        'url.path': path,
        'url.scheme': 'http',
        'network.protocol.version': req.httpVersion,
        ...(req.headers['user-agent'] === undefined
          ? {}
          : { 'user_agent.original': req.headers['user-agent'] }),
      },
    },
    parent,
  );
  const ctx = trace.setSpan(parent, span);
  // The request's and response's listeners added from here on (body parsing, `finish`) run in the
  // span's context too: stream events arrive from the socket, whose context is not the request's.
  context.bind(ctx, req);
  context.bind(ctx, res);
  let ended = false;
  // a client that leaves before the answer is complete: no `finish`, the span still ends
  res.once('close', () => {
    if (ended) return;
    ended = true;
    span.setAttribute('http.response.aborted', true);
    span.end();
  });
  return {
    run(next) {
      context.with(ctx, next);
    },
    end(route, status) {
      if (ended) return;
      ended = true;
      span.updateName(`${method} ${route}`);
      span.setAttributes({ 'http.route': route, 'http.response.status_code': status });
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}
