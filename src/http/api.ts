import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { ApiError } from './errors.ts';
import { setPageHeaders, type PageInfo } from './pagination.ts';
import type { Access, OrgNeeds, RepoNeeds } from './auth.ts';
import type { OrgRef, RepoTarget } from '../domain/repo.ts';
import { isPathInt, pathText, type ParamSchemas } from './params.ts';
import { jsonOnly, parseWith, rejectNul } from './input.ts';
import { respond, type ErrorStatus, type Success } from './responses.ts';
import { sendStream } from './stream-reply.ts';
import { reply, type Reply } from './reply.ts';
import { presenterIn, routeIn, type EarlierForm } from './variant.ts';
import type { ApiVariant } from '../domain/variant.ts';

export { reply, respond, type Reply };
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** Who may call a route, as documented in the OpenAPI document. Enforcement is `ctx.access`. */
export type AuthKind = 'public' | 'token' | 'admin' | 'agents-admin' | 'agent' | 'agent-or-admin';

/** The path parameters as their declared schemas parse them. */
export type ParamsOf<PS> = PS extends ParamSchemas
  ? { [K in keyof PS]: z.output<PS[K]> }
  : Record<never, never>;

export type Ctx<B, Q, P = Record<never, never>> = {
  req: Request;
  res: Response;
  body: B;
  query: Q;
  params: P;
  access: Access;
  /** The API variant the request is answered in (`access.variant`): a handler's policy choices. */
  variant: ApiVariant;
};

/** The type parameters of a route: its body, query and path-parameter schemas (each optional). */
export type Opt = z.ZodType | undefined;
export type OptParams = ParamSchemas | undefined;

export type RouteDef<BS extends Opt, QS extends Opt, T, PS extends OptParams = undefined> = {
  method: Method;
  path: string;
  /** Stable operation name for generated clients (camelCase). */
  operationId: string;
  summary: string;
  tag: string;
  auth: AuthKind;
  body?: BS;
  query?: QS;
  /** Body is read by the handler itself (raw text, streams) instead of the JSON parser. */
  rawBody?: boolean;
  /**
   * A `multipart/form-data` body the handler reads itself (`multipartUpload`): documents its
   * parts (a file part is a string with `format: binary`). Never parsed with this schema.
   */
  form?: z.ZodObject;
  /** The JSON body may be left out: the body schema then parses `undefined` (give it a default). */
  optionalBody?: boolean;
  /** The success response (envelope, status, schema, headers): see `respond`. */
  returns: Success<T>;
  /**
   * The schema of every path parameter: the one parser of path values, and their document.
   * A `pathInt` parameter whose value is not digits does not match the route at all (404); a
   * value another schema refuses is a 400. A route group supplies the parameters it consumes.
   */
  params?: PS;
  /**
   * OpenAPI links from the success response to operations it enables, by operationId, with
   * runtime expressions for their parameters (`$response.body#/data/name`, `$request.path.org`).
   */
  links?: Record<string, Record<string, string>>;
  /**
   * A request without `Authorization` may also be made by a signed-in web session (its cookie),
   * counted as the session's user with every scope. Only where the spec says so (the step log).
   */
  session?: boolean;
  /**
   * Route-specific error responses with what they mean here. Errors every route of its kind can
   * answer (401 for a bad token, 400 for a bad body or query, 404 for a path naming nothing, ...)
   * are added by the document builder.
   */
  errors?: Partial<Record<ErrorStatus, string>>;
  /**
   * How the route differs in the earlier API variant (src/http/variant.ts): absent there, or
   * another body, query or response shape. Without it the route is the same in both.
   */
  earlier?: EarlierForm<OutOf<BS>, OutOf<QS>, NoInfer<T>>;
  handler: (ctx: CtxOf<BS, QS, PS>) => Promise<Reply<NoInfer<T>>>;
};

type OutOf<S> = S extends z.ZodType ? z.output<S> : undefined;

type CtxOf<BS, QS, PS> = Ctx<
  BS extends z.ZodType ? z.output<BS> : undefined,
  QS extends z.ZodType ? z.output<QS> : undefined,
  ParamsOf<PS>
>;

export type AnyRoute = RouteDef<Opt, Opt, unknown, OptParams>;

/** Where the routes of one repository live; `Api.repoRoute` paths are relative to it. */
export const REPO_BASE = '/api/v1/repos/:org/:repo';
/** Where the routes of one organization live; `Api.orgRoute` paths are relative to it. */
export const ORG_BASE = '/api/v1/orgs/:org';

/**
 * A route of a group: path relative to the group's base, what the group needs (`Needs`), and a
 * handler given what the group resolved (`Given`).
 */
export type GroupRouteDef<BS extends Opt, QS extends Opt, T, PS extends OptParams, Needs, Given> = Omit<
  RouteDef<BS, QS, T, PS>,
  'handler'
> &
  Needs & { handler: (ctx: CtxOf<BS, QS, PS> & Given) => Promise<Reply<NoInfer<T>>> };

/**
 * A route of the repository group: its path is relative to `REPO_BASE`, and its handler gets the
 * repository (`target`) already resolved and authorised for `repo` (scope, role, a token even on
 * a public repository), stated once here.
 */
export type RepoRouteDef<BS extends Opt, QS extends Opt, T, PS extends OptParams = undefined> = GroupRouteDef<
  BS,
  QS,
  T,
  PS,
  { repo: RepoNeeds },
  { target: RepoTarget }
>;

/** A route of the organization group: path relative to `ORG_BASE`, `org` resolved for `needs`. */
export type OrgRouteDef<BS extends Opt, QS extends Opt, T, PS extends OptParams = undefined> = GroupRouteDef<
  BS,
  QS,
  T,
  PS,
  { org: OrgNeeds },
  { org: OrgRef }
>;

/**
 * The route table: every route is declared once here with its schemas, so express mounting
 * and the OpenAPI document come from the same definitions. A known path called with a method it
 * does not have answers 405 with `Allow` (OPTIONS: 204 with `Allow`).
 */
export class Api {
  readonly routes: AnyRoute[] = [];
  readonly router: Router = express.Router();
  private readonly methods: Router = express.Router();
  private readonly others: Router = express.Router();
  private readonly json: express.RequestHandler;
  private readonly baseUrl: () => string;
  private readonly sessionAccess: ((req: Request) => Promise<Access | undefined>) | undefined;

  constructor(opts: {
    bodyLimit: string;
    baseUrl: () => string;
    /** The `Access` of a request's web session cookie, for routes declared with `session`. */
    sessionAccess?: (req: Request) => Promise<Access | undefined>;
  }) {
    this.json = express.json({ limit: opts.bodyLimit, strict: false, type: 'application/json' });
    this.baseUrl = opts.baseUrl;
    this.sessionAccess = opts.sessionAccess;
    this.router.use(this.methods, this.others);
  }

  route<BS extends Opt = undefined, QS extends Opt = undefined, T = never, PS extends OptParams = undefined>(
    def: RouteDef<BS, QS, T, PS>,
  ): void {
    const route = def as unknown as AnyRoute;
    const schemas: ParamSchemas = def.params ?? {};
    for (const [, name] of def.path.matchAll(/[:*]([A-Za-z_][A-Za-z0-9_]*)/g)) {
      if (schemas[name!] === undefined) throw new Error(`${def.path}: path parameter ${name} has no schema`);
    }
    const ints = Object.keys(schemas).filter((k) => isPathInt(schemas[k]));
    if (!this.routes.some((r) => r.path === def.path)) {
      // Explicit OPTIONS first (express would answer it itself), other methods after all routes.
      this.methods.options(def.path, (req, res) => this.otherMethod(def.path, req, res));
      this.others.all(def.path, (req, res) => this.otherMethod(def.path, req, res));
    }
    this.routes.push(route);
    const jsonBody = def.body !== undefined && def.rawBody !== true;
    // Who may call comes first: an anonymous caller gets 401 (and a non-admin 403) before any
    // body is read or validated, so a bad body never hides a missing credential.
    const handlers: express.RequestHandler[] = [
      (req, _res, next) => (numeric(req, ints) ? next() : next('route')),
      (req, res, next) => {
        // a route absent from the request's variant names nothing there, before any other check
        if (routeIn(route, variantOf(res)) === undefined) throw notInVariant(req, variantOf(res));
        next();
      },
    ];
    const sessions = this.sessionAccess;
    if (def.session === true && sessions !== undefined) {
      // without an Authorization header, the web session (if any) is the caller
      handlers.push(async (req, res, next) => {
        const access = res.locals.access as Access | undefined;
        if (req.headers.authorization === undefined && access?.principal.kind === 'anonymous') {
          const s = await sessions(req);
          if (s !== undefined) res.locals.access = s;
        }
        next();
      });
    }
    handlers.push((req, res, next) => gate(def.auth, req, res, next));
    if (jsonBody) handlers.push(jsonOnly, this.json);
    handlers.push(async (req, res) => {
      const rawBody: unknown = req.body;
      const absent = req.headers['content-length'] === '0' || rawBody === undefined;
      if (jsonBody && absent && def.optionalBody !== true) {
        throw ApiError.badRequest('a JSON request body is required');
      }
      const access = res.locals.access as Access;
      const variant = access.variant;
      const form = routeIn(route, variant) ?? route;
      const body: unknown =
        form.body && jsonBody ? parseWith(form.body, absent ? undefined : rawBody, 'body') : undefined;
      const query: unknown = form.query ? parseWith(form.query, req.query, 'query') : undefined;
      // PostgreSQL text cannot hold NUL: reject it (400) instead of failing the write (500). What
      // is checked is what the schemas kept, so an ignored unknown field cannot fail a request.
      if (jsonBody) rejectNul(body, 'body');
      if (def.query !== undefined) rejectNul(query, 'query');
      const raw = remainders(req.params);
      const params = Object.fromEntries(
        Object.entries(schemas).map(([k, schema]) => [k, parseWith(schema, raw[k], `path.${k}`)]),
      );
      const ctx = { req, res, body, query, params, access, variant };
      const out: Reply<unknown> = await def.handler(ctx as CtxOf<BS, QS, PS>);
      await this.send(route, req, res, raw, out, presenterIn(route, variant));
    });
    this.methods[def.method](def.path, ...handlers);
  }

  /** A route of the repository group (see `RepoRouteDef`). */
  repoRoute<B extends Opt = undefined, Q extends Opt = undefined, T = never, P extends OptParams = undefined>(
    def: RepoRouteDef<B, Q, T, P>,
  ): void {
    const { repo: needs, handler, ...rest } = def;
    this.group(rest, REPO_BASE, { org: pathText, repo: pathText }, async (ctx) => {
      const names = ctx.params as unknown as { org: string; repo: string };
      return handler({ ...ctx, target: await ctx.access.repo(names.org, names.repo, needs) });
    });
  }

  /** A route of the organization group (see `OrgRouteDef`). */
  orgRoute<B extends Opt = undefined, Q extends Opt = undefined, T = never, P extends OptParams = undefined>(
    def: OrgRouteDef<B, Q, T, P>,
  ): void {
    const { org: needs, handler, ...rest } = def;
    this.group(rest, ORG_BASE, { org: pathText }, async (ctx) => {
      const names = ctx.params as unknown as { org: string };
      return handler({ ...ctx, org: await ctx.access.org(names.org, needs) });
    });
  }

  /** A route below `base`, whose parameters the group declares and whose handler it wraps. */
  private group<BS extends Opt, QS extends Opt, T, PS extends OptParams>(
    def: Omit<RouteDef<BS, QS, T, PS>, 'handler'>,
    base: string,
    baseParams: ParamSchemas,
    handler: RouteDef<BS, QS, T, PS>['handler'],
  ): void {
    this.route({
      ...def,
      path: `${base}${def.path}`,
      params: { ...baseParams, ...def.params } as unknown as PS,
      handler,
    });
  }

  /** The methods declared on a path (in a variant), as `Allow` lists them. */
  allowed(path: string, variant: ApiVariant = 'current'): string[] {
    const here = this.routes.filter((r) => r.path === path && routeIn(r, variant) !== undefined);
    if (here.length === 0) return [];
    const ms = new Set(here.map((r) => r.method.toUpperCase()));
    if (ms.has('GET')) ms.add('HEAD');
    ms.add('OPTIONS');
    return ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'].filter((m) => ms.has(m));
  }

  private otherMethod(path: string, req: Request, res: Response): void {
    const methods = this.allowed(path, variantOf(res));
    // a path whose every route is absent from the request's variant names nothing there
    if (methods.length === 0) throw notInVariant(req, variantOf(res));
    const allow = methods.join(', ');
    if (req.method === 'OPTIONS') {
      res.setHeader('Allow', allow);
      res.status(204).end();
      return;
    }
    // A declared method lands here when a numeric parameter was not a number: it names nothing.
    if (methods.includes(req.method)) throw ApiError.notFound();
    res.setHeader('Allow', allow);
    throw new ApiError(405, 'method_not_allowed', `${req.method} is not allowed here; allowed: ${allow}`);
  }

  /** Writes the reply, after checking it is the response the route declares (else a 500). */
  private async send(
    r: AnyRoute,
    req: Request,
    res: Response,
    params: Record<string, string>,
    out: Reply<unknown>,
    present: (value: unknown) => unknown = (v) => v,
  ) {
    const ok = r.returns;
    const undeclared = (what: string) =>
      new Error(`${r.method.toUpperCase()} ${r.path} answered ${what}, which it does not declare`);
    const location = (body: unknown) => {
      if (ok.location !== undefined)
        res.setHeader('Location', `${this.baseUrl()}${ok.location(body, params)}`);
    };
    const paged = (info: PageInfo) => setPageHeaders(req, res, this.baseUrl(), info);
    switch (out.kind) {
      case 'data':
        if (ok.kind !== 'data' || ok.status !== out.status) throw undeclared(`data ${out.status}`);
        location(out.data);
        res.status(out.status).json({ data: present(out.data) });
        return;
      case 'list':
        if (ok.kind !== 'list') throw undeclared('a list');
        paged(out.page);
        res.status(200).json({
          data: out.page.items.map(present),
          pagination: { page: out.page.page, per_page: out.page.perPage, total: out.page.total },
        });
        return;
      case 'bare':
        if (ok.kind !== 'bare' || ok.status !== out.status) throw undeclared(`a bare ${out.status}`);
        if (ok.paged !== undefined) paged(ok.paged(out.body));
        location(out.body);
        res.status(out.status).json(present(out.body));
        return;
      case 'empty':
        if (ok.kind !== 'empty' && ok.noContent === undefined) throw undeclared('204');
        res.status(204).end();
        return;
      case 'notModified':
        if (ok.etag === undefined) throw undeclared('304');
        res.status(304).end();
        return;
      case 'stream':
        if (ok.kind !== 'text') throw undeclared('a stream');
        await sendStream(req, res, out);
        return;
      case 'handled':
        if (ok.kind !== 'text') throw undeclared('a handler-written response');
        return;
    }
  }
}

/** The variant of a request (its `Access`; before authentication ran, the current one). */
function variantOf(res: Response): ApiVariant {
  return (res.locals.access as Access | undefined)?.variant ?? 'current';
}

function notInVariant(req: Request, variant: ApiVariant): ApiError {
  return new ApiError(
    404,
    'not_found',
    `no route for ${req.method} ${req.path} in the ${variant} API variant`,
  );
}

/** Does every numeric path parameter hold digits? (Else the route does not match.) */
function numeric(req: Request, ints: readonly string[]): boolean {
  const params = req.params as Record<string, string | string[]>;
  return ints.every((k) => {
    const v = params[k];
    return typeof v !== 'string' || /^\d+$/.test(v);
  });
}

/** Express 5 gives a `*name` parameter as its list of segments: handlers get it joined with `/`. */
function remainders(params: Record<string, string | string[]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(params)) out[k] = Array.isArray(v) ? v.join('/') : v;
  return out;
}

/**
 * Route-level credential check from the declared `auth` kind: `token` and `admin` routes need a
 * user token (401), `admin` routes a site administrator (403), `agents-admin` routes one whose
 * token holds `agents:admin` or `admin` (403). Finer rules stay in the handler.
 * A path segment with a NUL character names nothing that can exist (404).
 */
function gate(auth: AuthKind, req: Request, res: Response, next: express.NextFunction): void {
  // (A `*path` remainder is the handler's to judge: a NUL there is a bad path, 400.)
  const params = Object.values(req.params as Record<string, string | string[]>);
  if (params.some((v) => typeof v === 'string' && v.includes('\u0000'))) throw ApiError.notFound();
  const access = res.locals.access as Access | undefined;
  if (auth === 'token' || auth === 'admin' || auth === 'agents-admin') {
    if (access?.principal.kind !== 'user') throw ApiError.unauthorized();
    if (auth === 'admin') access.admin();
    if (auth === 'agents-admin') access.agentsAdmin();
  }
  next();
}
