/**
 * The web router: pages are declared with `get`, `post` and `form`; each request is resolved to
 * its viewer (the session cookie), given an `Access`, answered with security headers, and its
 * errors are shown as pages. Unsafe requests pass the CSRF rules of `csrf.ts` first.
 */
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import express, { type Request, type Response, type Router } from 'express';
import type { Logger } from 'pino';
import { Access, type Directory } from '../http/auth.ts';
import { sessionPrincipal } from './session-access.ts';
import { redactSecrets } from '../telemetry/logger.ts';
import { ApiError } from '../http/errors.ts';
import { RepositoryUnavailable } from '../storage/blob.ts';
import { multipartUpload, type IncomingUpload } from '../http/multipart.ts';
import { clientAddress } from '../http/throttle.ts';
import { html } from './html.ts';
import { layout, loginUrl } from './layout.ts';
import { csrfRefusal } from './csrf.ts';
import { sessionCookie } from './cookies.ts';
import type { SessionsService } from './sessions.ts';
import { EMPTY_FORM, web, type FormState, type PageCtx, type UserCtx, type WebReply } from './context.ts';

export type WebDeps = {
  dir: Directory;
  sessions: SessionsService;
  baseUrl: () => string;
  log: Logger;
  /** How long a session may last (`TRIAD_SESSION_MAX`): the cookie's lifetime. */
  sessionMaxMs: number;
};

const gzipped = promisify(gzip);

/** Headers of every web answer (DESIGN: one strict policy, no inline script or style). */
export const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export function securityHeaders(res: Response): void {
  res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'same-origin');
}

type Handler = (ctx: PageCtx) => Promise<WebReply>;
type UserHandler = (ctx: UserCtx) => Promise<WebReply>;
type Render<C> = (ctx: C, state: FormState) => Promise<WebReply>;
type Submit<C> = (ctx: C, values: FormState['values']) => Promise<WebReply>;

/** How a POST is checked: the session's form token (signed in), or only its origin (sign-in forms). */
type PostOptions<C> = { render?: Render<C> | undefined };

const FORM_BODY = express.urlencoded({ extended: false, limit: '1mb', parameterLimit: 2000 });

export class WebRouter {
  readonly router: Router = express.Router();
  private readonly d: WebDeps;

  constructor(deps: WebDeps) {
    this.d = deps;
  }

  get cookie() {
    return sessionCookie(this.d.baseUrl(), this.d.sessionMaxMs);
  }

  /** A page anyone may ask for (the handler's services decide what they see). */
  get(path: string, handler: Handler): void {
    this.router.get(path, (req, res) => this.run(req, res, handler));
  }

  /**
   * A page at a path the VCS clients share (a clone URL): only a browser's navigation (it asks
   * for `text/html`, without a wire-protocol query) gets it; every other request goes on to the
   * clone URL's handler.
   */
  navigation(path: string, handler: Handler): void {
    this.router.get(path, (req, res, next) => {
      if (!isNavigation(req)) {
        next();
        return;
      }
      return this.run(req, res, handler);
    });
  }

  /** A page for signed-in users: anonymous visitors are sent to sign in and brought back. */
  userGet(path: string, handler: UserHandler): void {
    this.get(path, (ctx) => (signedIn(ctx) ? handler(ctx) : Promise.resolve(toLogin(ctx))));
  }

  /**
   * A POST of a signed-in user's form: the CSRF rules, then `submit`. A refused or failed form
   * (400, 403, 409, 413, 422, 429) is shown again by `render` with what was typed (never a
   * password) and the reason; without `render`, the reason is an error page.
   */
  userPost(path: string, submit: Submit<UserCtx>, opts: PostOptions<UserCtx> = {}): void {
    this.router.post(path, (req, res) =>
      this.run(req, res, async (ctx) => {
        if (!signedIn(ctx)) return toLogin(ctx);
        const values = await formValues(req, res);
        const refusal = csrfRefusal(req, this.d.baseUrl(), ctx.formToken, values);
        return this.submit(ctx, values, refusal, submit, opts.render);
      }),
    );
  }

  /** `userGet` and `userPost` of one form page: GET shows it empty, POST submits it. */
  form(path: string, render: Render<UserCtx>, submit: Submit<UserCtx>): void {
    this.userGet(path, (ctx) => render(ctx, EMPTY_FORM));
    this.userPost(path, submit, { render });
  }

  /**
   * A signed-in user's multipart form of one file (`opts.field`, at most `opts.maxBytes`), read
   * as it streams: the browser's origin is checked before the body is read, and the form token,
   * a field the form sends before the file, as soon as the file part begins, so a refused upload
   * stores nothing. Refusals and failures are shown by `render` as for `userPost` (the file
   * itself is never kept).
   */
  userUpload(
    path: string,
    opts: { field: string; maxBytes: number },
    submit: (ctx: UserCtx, upload: IncomingUpload) => Promise<WebReply>,
    post: PostOptions<UserCtx> = {},
  ): void {
    this.router.post(path, (req, res) =>
      this.run(req, res, async (ctx) => {
        if (!signedIn(ctx)) return toLogin(ctx);
        const base = this.d.baseUrl();
        const origin = csrfRefusal(req, base, undefined, {});
        const upload = multipartUpload(req, opts);
        const guarded: IncomingUpload = {
          ...upload,
          file: async () => {
            const f = await upload.file();
            const refusal = csrfRefusal(req, base, ctx.formToken, f.before);
            if (refusal !== undefined) {
              upload.abandon();
              throw new ApiError(403, 'forbidden', refusal);
            }
            return f;
          },
        };
        return this.submit(ctx, {}, origin, (c) => submit(c, guarded), post.render);
      }),
    );
  }

  /** A POST anyone may send (sign-in forms): its origin is checked, there is no session yet. */
  anonPost(path: string, submit: Submit<PageCtx>, render: Render<PageCtx>): void {
    this.router.post(path, (req, res) =>
      this.run(req, res, async (ctx) => {
        const values = await formValues(req, res);
        const refusal = csrfRefusal(req, this.d.baseUrl(), undefined, values);
        return this.submit(ctx, values, refusal, submit, render);
      }),
    );
  }

  private async submit<C extends PageCtx>(
    ctx: C,
    values: FormState['values'],
    refusal: string | undefined,
    submit: Submit<C>,
    render: Render<C> | undefined,
  ): Promise<WebReply> {
    const again = async (status: number, error: string) => {
      if (render === undefined)
        throw new ApiError(status, status === 403 ? 'forbidden' : 'bad_request', error);
      const r = await render(ctx, { values: kept(values), error });
      return r.kind === 'page' || r.kind === 'fragment' ? { ...r, status } : r;
    };
    if (refusal !== undefined) return again(403, refusal);
    try {
      return await submit(ctx, values);
    } catch (e) {
      if (e instanceof ApiError && [400, 403, 409, 413, 422, 429].includes(e.status)) {
        for (const [k, v] of Object.entries(e.headers)) ctx.res.setHeader(k, v);
        return again(e.status, e.message);
      }
      throw e;
    }
  }

  /** Resolves the viewer, runs the handler, and sends its reply (or the page of its error). */
  private async run(req: Request, res: Response, handler: Handler): Promise<void> {
    securityHeaders(res);
    res.setHeader('Cache-Control', 'private, no-cache');
    const started = process.hrtime.bigint();
    let ctx: PageCtx | undefined;
    let reply: WebReply;
    try {
      ctx = await this.context(req, res);
      reply = await handler(ctx);
    } catch (e) {
      reply = this.failure(req, res, ctx, e);
    }
    if (res.headersSent || reply.kind === 'handled') return;
    const viewer = ctx ?? { user: undefined, formToken: undefined, path: req.originalUrl };
    if (reply.kind === 'redirect') {
      res.redirect(303, reply.to);
      return;
    }
    // (an island inserts a fragment only when the answer says it is one of Triad's own)
    if (reply.kind === 'fragment') res.setHeader('X-Triad-Fragment', '1');
    const text =
      reply.kind === 'page' ? layout(viewer, reply.title, reply.body, reply.opts).text : reply.body.text;
    await sendHtml(req, res, reply.status, text, started);
  }

  private async context(req: Request, res: Response): Promise<PageCtx> {
    const cookie = this.cookie.read(req);
    const session = cookie === undefined ? undefined : await this.d.sessions.resolve(cookie);
    if (cookie !== undefined && session === undefined) this.cookie.clear(res);
    const principal = sessionPrincipal(session);
    const params: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.params as Record<string, string | string[]>)) {
      params[k] = Array.isArray(v) ? v.join('/') : v;
    }
    const query: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.query)) {
      const first: unknown = Array.isArray(v) ? v[0] : v;
      if (typeof first === 'string') query[k] = first;
    }
    return {
      req,
      res,
      access: new Access(principal, this.d.dir),
      session,
      user: principal.kind === 'user' ? principal.user : undefined,
      formToken: session?.formToken,
      path: req.originalUrl,
      params,
      query,
    };
  }

  /** The page of an error: sign-in for 401, the status and message of an `ApiError`, else 500. */
  private failure(req: Request, res: Response, ctx: PageCtx | undefined, e: unknown): WebReply {
    const err = e as { type?: string; status?: number };
    if (e instanceof ApiError) {
      if (e.status === 401 && ctx !== undefined) return toLogin(ctx);
      for (const [k, v] of Object.entries(e.headers)) res.setHeader(k, v);
      return errorPage(e.status, e.message);
    }
    if (e instanceof RepositoryUnavailable) {
      res.setHeader('Retry-After', '5');
      return errorPage(
        503,
        "This repository's storage is unavailable right now. Try again in a few seconds.",
      );
    }
    if (err.type === 'entity.too.large') return errorPage(413, 'The form is too large.');
    if (typeof err.status === 'number' && err.status >= 400 && err.status < 500) {
      return errorPage(err.status, 'The request could not be read.');
    }
    const reqId = String(res.getHeader('x-request-id'));
    this.d.log.error(
      { err: e, reqId, method: req.method, url: redactSecrets(req.originalUrl) },
      'web page failed',
    );
    return errorPage(500, `Something went wrong on our side (request id ${reqId}).`);
  }

  /** Starts a session for `user` (a new id at every sign-in) and sets its cookie. */
  async signIn(ctx: PageCtx, user: { id: number; username: string; isAdmin: boolean }): Promise<void> {
    const ua = ctx.req.headers['user-agent'];
    const s = await this.d.sessions.start(user, {
      userAgent: typeof ua === 'string' ? ua : '',
      address: clientAddress(ctx.req),
    });
    this.cookie.set(ctx.res, s.cookie);
  }
}

/**
 * Sends a page, gzipped (in the thread pool, off the event loop) when the browser takes it and it
 * is larger than a few packets, with `Server-Timing: app;dur=` the time from the request's
 * arrival to the page ready to send.
 */
async function sendHtml(req: Request, res: Response, status: number, text: string, started: bigint) {
  res.setHeader('Vary', 'Accept-Encoding');
  let body: Buffer | string = text;
  if (text.length > 4096 && req.acceptsEncodings('gzip') === 'gzip') {
    body = await gzipped(Buffer.from(text, 'utf8'), { level: 5 });
    res.setHeader('Content-Encoding', 'gzip');
  }
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  res.setHeader('Server-Timing', `app;dur=${ms.toFixed(1)}`);
  res.status(status).type('text/html; charset=utf-8').send(body);
}

const TITLES: Record<number, string> = {
  400: 'Bad request',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  409: 'Conflict',
  413: 'Too large',
  415: 'Unsupported form',
  429: 'Too many attempts',
  503: 'Unavailable',
};

export function errorPage(status: number, message: string): WebReply {
  const title = TITLES[status] ?? (status >= 500 ? 'Server error' : 'Error');
  const text = status === 404 ? 'There is nothing here, or you may not see it.' : message;
  return web.page(
    title,
    html`<section class="error-page">
      <h1>${title}</h1>
      <p>${text}</p>
      <p><a href="/">Go to the start page</a></p>
    </section>`,
    { status },
  );
}

/** A browser navigating (not git, hg or fossil speaking their protocols at the same URL). */
export function isNavigation(req: Request): boolean {
  const accept = req.headers.accept ?? '';
  if (!/\btext\/html\b/i.test(accept)) return false;
  return !['cmd', 'service'].some((k) => k in (req.query as Record<string, unknown>));
}

function signedIn(ctx: PageCtx): ctx is UserCtx {
  return ctx.user !== undefined && ctx.session !== undefined && ctx.formToken !== undefined;
}

function toLogin(ctx: PageCtx): WebReply {
  const back = ctx.req.method === 'GET' ? ctx.path : (ctx.req.headers.referer ?? '/');
  const u = URL.parse(back, 'http://x');
  return web.redirect(loginUrl(u === null ? '/' : `${u.pathname}${u.search}`));
}

/**
 * The fields of a form's body (`application/x-www-form-urlencoded`); a body the parser refuses
 * (too large, too many fields, a bad charset) throws its error, which `failure` shows as a page.
 */
async function formValues(req: Request, res: Response): Promise<FormState['values']> {
  await new Promise<void>((resolve, reject) =>
    // (body-parser's errors are `http-errors` instances: Errors with `status` and `type`)
    FORM_BODY(req, res, (err?: Error) => (err === undefined ? resolve() : reject(err))),
  );
  const body = (req.body ?? {}) as Record<string, unknown>;
  const out: FormState['values'] = {};
  for (const [k, v] of Object.entries(body)) {
    if (typeof v === 'string') out[k] = v;
    else if (Array.isArray(v)) out[k] = v.filter((x): x is string => typeof x === 'string');
  }
  return out;
}

/** What a form shows again: everything typed but passwords and the form token. */
function kept(values: FormState['values']): FormState['values'] {
  return Object.fromEntries(
    Object.entries(values).filter(([k]) => k !== '_csrf' && !k.toLowerCase().includes('password')),
  );
}
