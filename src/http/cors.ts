import cors from 'cors';
import type { RequestHandler } from 'express';

/** Response headers a page of an allowed origin may read, beyond the CORS-safelisted ones. */
export const EXPOSED_HEADERS = [
  'Link',
  'X-Total-Count',
  'Location',
  'Retry-After',
  'X-Request-Id',
  'X-Svc-Api-Variant',
  'ETag',
];

/**
 * CORS for the API (`TRIAD_CORS_ORIGINS`): a page of one of `origins` may call it from a browser
 * with a token in `Authorization`; never with credentials (no `Access-Control-Allow-Credentials`:
 * a browser sends no cookie or HTTP authentication of its own). Another origin gets no CORS
 * header, so its browser refuses the answer. A preflight (`OPTIONS`) gets its CORS headers here
 * and is answered by the route table (204 with `Allow` on a known path, else 404).
 */
export function corsFor(origins: readonly string[]): RequestHandler {
  return cors({
    origin: [...origins],
    credentials: false,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: 600,
    preflightContinue: true,
  });
}
