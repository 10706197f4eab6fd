import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { z } from 'zod';
import { RepositoryUnavailable, StorageUnavailable } from '../storage/blob.ts';

/** `Retry-After` of a 503 for a repository whose storage node cannot be reached. */
const REPOSITORY_RETRY_SECONDS = 5;
import { redactSecrets } from '../telemetry/logger.ts';

/** Every `error.code` the API answers (the OpenAPI document lists them as an enum). */
export const ERROR_CODES = [
  'bad_request',
  'validation_failed',
  'unauthorized',
  'forbidden',
  'not_found',
  'method_not_allowed',
  'conflict',
  'merge_conflict',
  'head_moved',
  'target_moved',
  'not_open',
  'not_fast_forward',
  'checks_pending',
  'checks_failed',
  'payload_too_large',
  'unsupported_media_type',
  'range_not_satisfiable',
  'unprocessable',
  'limit_exceeded',
  'rate_limited',
  'service_unavailable',
  'storage_unavailable',
  'internal',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** The one error body: `{error: {code, message}}`. */
export const errorEnvelope = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).meta({ description: 'lowercase snake_case error identifier' }),
      message: z.string().meta({ description: 'human-readable explanation' }),
      conflicted_files: z
        .array(z.string())
        .optional()
        .meta({ description: '`merge_conflict` only: the paths that conflict' }),
    }),
  })
  .meta({ id: 'Error' });

/** The one error type of the API; the error middleware turns it into `{error: {code, message}}`. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;
  /** Fields the envelope's `error` carries besides `code` and `message` (declared in `errorEnvelope`). */
  readonly details: { conflicted_files?: string[] } = {};

  constructor(status: number, code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }

  /** A merge that cannot be done as asked: 409 with its own code (and the conflicting paths). */
  static mergeRefused(code: ErrorCode, message: string, conflictedFiles?: string[]): ApiError {
    const e = new ApiError(409, code, message);
    if (conflictedFiles !== undefined) e.details.conflicted_files = conflictedFiles;
    return e;
  }

  static badRequest(message: string): ApiError {
    return new ApiError(400, 'bad_request', message);
  }
  static validation(message: string): ApiError {
    return new ApiError(400, 'validation_failed', message);
  }
  static unauthorized(message = 'authentication required'): ApiError {
    return new ApiError(401, 'unauthorized', message);
  }
  static forbidden(message = 'insufficient permissions'): ApiError {
    return new ApiError(403, 'forbidden', message);
  }
  static notFound(what = 'resource'): ApiError {
    return new ApiError(404, 'not_found', `${what} not found`);
  }
  static conflict(message: string): ApiError {
    return new ApiError(409, 'conflict', message);
  }
  /** The blob store (files or S3) failed or cannot be reached. */
  static storageUnavailable(message = 'the blob store is unavailable; try again later'): ApiError {
    return new ApiError(503, 'storage_unavailable', message);
  }
  static repositoryUnavailable(): ApiError {
    const message = "the repository's storage node is unavailable; try again later";
    return new ApiError(503, 'storage_unavailable', message, {
      'Retry-After': String(REPOSITORY_RETRY_SECONDS),
    });
  }
  static tooLarge(message: string): ApiError {
    return new ApiError(413, 'payload_too_large', message);
  }
  /** A per-user cap (tokens, organizations) is reached: 409 with its own code. */
  static limitExceeded(message: string): ApiError {
    return new ApiError(409, 'limit_exceeded', message);
  }
  /** Too many failed authentications from one address: 429 with `Retry-After` (seconds). */
  static rateLimited(retryAfterSeconds: number): ApiError {
    const s = Math.max(1, Math.ceil(retryAfterSeconds));
    return new ApiError(
      429,
      'rate_limited',
      `too many failed authentications from this address; retry in ${s} s`,
      { 'Retry-After': String(s) },
    );
  }
}

export function sendError(res: Parameters<RequestHandler>[1], err: ApiError): void {
  // An error is never a version of what a conditional read had begun to answer (`unchanged`).
  if (res.hasHeader('ETag')) {
    res.removeHeader('ETag');
    res.setHeader('Cache-Control', 'no-store');
  }
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  if (err.status === 401 && !res.hasHeader('WWW-Authenticate')) bearerChallenge(res.req);
  res.status(err.status).json({ error: { code: err.code, message: err.message, ...err.details } });
}

/**
 * RFC 6750 challenge on API 401s (`invalid_token` when a token was sent). Clone URLs answer their
 * own `Basic` challenge in the hosting handler and never come here with a 401.
 */
function bearerChallenge(req: Request): void {
  if (!req.originalUrl.toLowerCase().startsWith('/api/')) return;
  const sent = req.headers.authorization !== undefined;
  req.res?.setHeader('WWW-Authenticate', `Bearer realm="triad"${sent ? ', error="invalid_token"' : ''}`);
}

export const notFoundRoute: RequestHandler = (req, _res, next) => {
  next(new ApiError(404, 'not_found', `no route for ${req.method} ${req.path}`));
};

type BodyParserError = Error & { type?: string; status?: number; statusCode?: number; expose?: boolean };

/**
 * Maps every error to the envelope: ApiError as is, a blob store failure to 503
 * `storage_unavailable`, body-parser errors to 4xx, anything else to 500.
 */
export function errorMiddleware(log: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    if (res.headersSent) {
      // a streamed body failing midway (a raw download's process, an archive): the response is
      // cut, the connection closed so the client sees it short, never reused
      const reqId = res.getHeader('x-request-id');
      log.error(
        { err, reqId, method: req.method, url: redactSecrets(req.originalUrl) },
        'failed after the response headers',
      );
      req.socket.destroy();
      return;
    }
    if (err instanceof ApiError) {
      sendError(res, err);
      return;
    }
    if (err instanceof RepositoryUnavailable) {
      // the repository's storage node is down or moving it: retryable, other repositories work
      log.warn({ err, method: req.method, url: redactSecrets(req.originalUrl) }, 'storage node unavailable');
      sendError(res, ApiError.repositoryUnavailable());
      return;
    }
    if (err instanceof StorageUnavailable) {
      // the blob store (files or S3) failed: retryable, not a bug
      log.warn({ err, method: req.method, url: redactSecrets(req.originalUrl) }, 'blob store unavailable');
      sendError(res, ApiError.storageUnavailable());
      return;
    }
    const e = err as BodyParserError;
    const status = e.status ?? e.statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      if (e.type === 'entity.parse.failed') {
        sendError(res, ApiError.badRequest('malformed JSON body'));
      } else if (e.type === 'entity.too.large') {
        sendError(res, ApiError.tooLarge('request body too large'));
      } else if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') {
        sendError(res, new ApiError(415, 'unsupported_media_type', e.message));
      } else {
        sendError(res, new ApiError(status, 'bad_request', e.expose === true ? e.message : 'bad request'));
      }
      return;
    }
    const reqId = res.getHeader('x-request-id');
    log.error({ err, reqId, method: req.method, url: redactSecrets(req.originalUrl) }, 'unhandled error');
    sendError(res, new ApiError(500, 'internal', `internal error (request id ${String(reqId)})`));
  };
}
