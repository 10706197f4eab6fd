import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { ApiError } from './errors.ts';
import { setPageHeaders, type Page } from './pagination.ts';
import type { Access } from './auth.ts';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** Who may call a route, as documented in the OpenAPI document. Enforcement is `ctx.access`. */
export type AuthKind = 'public' | 'token' | 'admin' | 'agent';

/** What a handler returns; `send` turns it into the response. */
export type Reply =
  | { kind: 'json'; status: number; body: unknown }
  | { kind: 'list'; page: Page<unknown> }
  | { kind: 'empty'; status: number }
  | { kind: 'handled' };

export const reply = {
  ok: (data: unknown): Reply => ({ kind: 'json', status: 200, body: { data } }),
  created: (data: unknown): Reply => ({ kind: 'json', status: 201, body: { data } }),
  bare: (body: unknown, status = 200): Reply => ({ kind: 'json', status, body }),
  list: (page: Page<unknown>): Reply => ({ kind: 'list', page }),
  noContent: (): Reply => ({ kind: 'empty', status: 204 }),
  /** The handler wrote the response itself (streams, plain text). */
  handled: (): Reply => ({ kind: 'handled' }),
};

export type Ctx<B, Q> = {
  req: Request;
  res: Response;
  body: B;
  query: Q;
  params: Record<string, string>;
  access: Access;
};

export type RouteDef<BS extends z.ZodType | undefined, QS extends z.ZodType | undefined> = {
  method: Method;
  path: string;
  summary: string;
  tag: string;
  auth: AuthKind;
  body?: BS;
  query?: QS;
  /** Body is read by the handler itself (raw text, streams) instead of the JSON parser. */
  rawBody?: boolean;
  /** Documented success status (200 by default). */
  status?: number;
  /** Documented success response description. */
  returns?: string;
  handler: (
    ctx: Ctx<
      BS extends z.ZodType ? z.output<BS> : undefined,
      QS extends z.ZodType ? z.output<QS> : undefined
    >,
  ) => Promise<Reply>;
};

type AnyRoute = RouteDef<z.ZodType | undefined, z.ZodType | undefined>;

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

/**
 * The route table: every route is declared once here with its schemas, so express mounting
 * and the OpenAPI document come from the same definitions.
 */
export class Api {
  readonly routes: AnyRoute[] = [];
  readonly router: Router = express.Router();
  private readonly json: express.RequestHandler;
  private readonly baseUrl: () => string;

  constructor(opts: { bodyLimit: string; baseUrl: () => string }) {
    this.json = express.json({ limit: opts.bodyLimit, strict: false, type: () => true });
    this.baseUrl = opts.baseUrl;
  }

  route<BS extends z.ZodType | undefined = undefined, QS extends z.ZodType | undefined = undefined>(
    def: RouteDef<BS, QS>,
  ): void {
    this.routes.push(def as unknown as AnyRoute);
    const jsonBody = def.body !== undefined && def.rawBody !== true;
    // Who may call comes first: an anonymous caller gets 401 (and a non-admin 403) before any
    // body is read or validated, so a bad body never hides a missing credential.
    const handlers: express.RequestHandler[] = [(req, res, next) => gate(def.auth, req, res, next)];
    if (jsonBody) handlers.push(this.json);
    handlers.push(async (req, res) => {
      const rawBody: unknown = req.body;
      if (jsonBody && (req.headers['content-length'] === '0' || rawBody === undefined)) {
        throw ApiError.badRequest('a JSON request body is required');
      }
      // PostgreSQL text cannot hold NUL: reject it up front (400) instead of failing the write (500).
      if (jsonBody) rejectNul(rawBody, 'body');
      if (def.query !== undefined) rejectNul(req.query, 'query');
      const body: unknown = def.body && jsonBody ? parseWith(def.body, rawBody, 'body') : undefined;
      const query: unknown = def.query ? parseWith(def.query, req.query, 'query') : undefined;
      const ctx = {
        req,
        res,
        body,
        query,
        params: req.params as Record<string, string>,
        access: res.locals.access as Access,
      };
      const out = await def.handler(ctx as Parameters<RouteDef<BS, QS>['handler']>[0]);
      this.send(req, res, out);
    });
    this.router[def.method](def.path, ...handlers);
  }

  private send(req: Request, res: Response, out: Reply): void {
    switch (out.kind) {
      case 'json':
        res.status(out.status).json(out.body);
        return;
      case 'list':
        setPageHeaders(req, res, this.baseUrl(), out.page);
        res.status(200).json({
          data: out.page.items,
          pagination: { page: out.page.page, per_page: out.page.perPage, total: out.page.total },
        });
        return;
      case 'empty':
        res.status(out.status).end();
        return;
      case 'handled':
        return;
    }
  }
}

/**
 * Route-level credential check from the declared `auth` kind: `token` and `admin` routes need a
 * user token (401), `admin` routes a site administrator (403). Finer rules stay in the handler.
 * A path segment with a NUL character names nothing that can exist (404).
 */
function gate(auth: AuthKind, req: Request, res: Response, next: express.NextFunction): void {
  const params = req.params as Record<string, string | undefined>;
  if (Object.values(params).some((v) => v?.includes('\u0000') === true)) throw ApiError.notFound();
  const access = res.locals.access as Access | undefined;
  if (auth === 'token' || auth === 'admin') {
    if (access?.principal.kind !== 'user') throw ApiError.unauthorized();
    if (auth === 'admin') access.admin();
  }
  next();
}

type JsonPath = { key: string; parent: JsonPath | undefined };
function pathText(p: JsonPath): string {
  const keys: string[] = [];
  for (let at: JsonPath | undefined = p; at !== undefined; at = at.parent) keys.push(at.key);
  return keys.reverse().join('.');
}

/**
 * 400 `validation_failed` when any string (or key) in a parsed JSON value contains NUL. Walks
 * with an explicit stack and builds the path only on failure, so a deeply nested body can
 * neither overflow the call stack nor build huge path strings.
 */
function rejectNul(root: unknown, rootWhere: string): void {
  const stack: [unknown, JsonPath][] = [[root, { key: rootWhere, parent: undefined }]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [value, at] = item;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) {
        throw ApiError.validation(`${pathText(at)}: must not contain NUL characters`);
      }
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push([v, { key: String(i), parent: at }]));
    } else if (typeof value === 'object' && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        if (k.includes('\u0000'))
          throw ApiError.validation(`${pathText(at)}: keys must not contain NUL characters`);
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
