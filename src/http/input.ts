import type { NextFunction, Request, Response } from 'express';
import { z } from 'zod';
import { ApiError } from './errors.ts';

/**
 * Request input: parsing with zod into the error envelope, NUL checks, raw bodies, and the
 * request-side schema pieces shared by the features, each stating in the OpenAPI document the
 * rule zod enforces, so generated clients and fuzzers know what the server accepts.
 */

/**
 * A trimmed text that must not be blank: `.meta(nonBlank)` on a `z.string().trim().min(1)`. The
 * character class is JavaScript's `trim` set, spelled out (regex `\s` differs between languages).
 */
export const nonBlank = {
  pattern:
    '^[^\\u0000]*[^\\u0000\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff][^\\u0000]*$',
};

/**
 * An RFC 3339 date-time whose year is 0002..9998, passed on as UTC (`...Z`): any offset zod
 * accepts (PostgreSQL takes only up to ±15:59) keeps the instant within what PostgreSQL stores
 * and a four-digit-year ISO string can answer.
 */
export const timestampInput = z.iso
  .datetime({ offset: true })
  .refine((v) => !/^(000[01]|9999)/.test(v), 'the year must be between 0002 and 9998')
  .meta({ not: { pattern: '^(000[01]|9999)' } })
  .transform((v) => new Date(v).toISOString());

/** A user or organization name: 1 to 64 letters, digits, `.`, `_` and `-`, not `.`/`_`/`-` at either end. */
export const handleSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(
    /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/,
    'letters, digits, ".", "_" and "-", not at either end',
  );

// ----- parsing ------------------------------------------------------------------------------------

export function zodMessage(error: z.ZodError, where: string): string {
  return error.issues
    .map((i) => {
      const at = i.path.length > 0 ? `${where}.${i.path.join('.')}` : where;
      return `${at}: ${i.message}`;
    })
    .join('; ');
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw ApiError.validation(zodMessage(r.error, where));
  return r.data;
}

type JsonPath = { key: string; parent: JsonPath | undefined };
function jsonPathText(p: JsonPath): string {
  const keys: string[] = [];
  for (let at: JsonPath | undefined = p; at !== undefined; at = at.parent) keys.push(at.key);
  return keys.reverse().join('.');
}

/**
 * 400 `validation_failed` when any string (or key) in a parsed JSON value contains NUL. Walks
 * with an explicit stack and builds the path only on failure, so a deeply nested body can
 * neither overflow the call stack nor build huge path strings.
 */
export function rejectNul(root: unknown, rootWhere: string): void {
  const stack: [unknown, JsonPath][] = [[root, { key: rootWhere, parent: undefined }]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [value, at] = item;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) {
        throw ApiError.validation(`${jsonPathText(at)}: must not contain NUL characters`);
      }
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push([v, { key: String(i), parent: at }]));
    } else if (typeof value === 'object' && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        if (k.includes('\u0000'))
          throw ApiError.validation(`${jsonPathText(at)}: keys must not contain NUL characters`);
        stack.push([v, { key: k, parent: at }]);
      }
    }
  }
}

/** Reads a raw request body of at most `limit` bytes (413 `payload_too_large` beyond). */
export async function readRawBody(req: Request, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) {
    req.resume();
    throw ApiError.tooLarge(`request body may be at most ${limit} bytes`);
  }
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      req.resume();
      throw ApiError.tooLarge(`request body may be at most ${limit} bytes`);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

/**
 * A JSON route reads a body only when it is `application/json` (parameters such as `charset`
 * allowed): any other body is a 415, never parsed as JSON, so a form another site's page posts
 * (which needs no preflight) is never read as a request. A request without a body (no
 * `Transfer-Encoding`, `Content-Length` absent or 0) passes whatever its `Content-Type`.
 */
export function jsonOnly(req: Request, _res: Response, next: NextFunction): void {
  const length = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (hasBody && req.is('application/json') !== 'application/json') {
    const message = 'the request body must be JSON, sent with Content-Type: application/json';
    throw new ApiError(415, 'unsupported_media_type', message);
  }
  next();
}
