/**
 * What a page handler is given (`PageCtx`) and what it answers (`WebReply`), shared by the web
 * router (web.ts) and the pages. A handler turns the request into an `Access` (the session's user
 * with every scope, or anonymous) and calls services exactly like an API route does.
 */
import type { Request, Response } from 'express';
import type { AuthUser } from '../domain/access.ts';
import { ApiError } from '../http/errors.ts';
import type { Access } from '../http/auth.ts';
import type { Html, Renderable } from './html.ts';
import type { PageOptions } from './layout.ts';
import type { SessionRow } from './sessions.ts';

/** Who looks at a page, as the layout needs it. */
export type Viewer = {
  user: AuthUser | undefined;
  /** The session's form token (every form carries it), when signed in. */
  formToken: string | undefined;
  /** The path and query of this page (where "Sign in" comes back to). */
  path: string;
};

export type PageCtx = Viewer & {
  req: Request;
  res: Response;
  access: Access;
  session: SessionRow | undefined;
  /** Path parameters (a `*rest` wildcard joined with `/`). */
  params: Record<string, string>;
  /** Query parameters (the first value of a repeated one). */
  query: Record<string, string>;
};

/** A signed-in page's context. */
export type UserCtx = PageCtx & { user: AuthUser; session: SessionRow; formToken: string };

/** A form as it is shown again: what the user had typed (never passwords) and what went wrong. */
export type FormState = { values: Record<string, string | string[]>; error?: string | undefined };
export const EMPTY_FORM: FormState = { values: {} };

export type WebReply =
  | { kind: 'page'; status: number; title: string; body: Html; opts: PageOptions }
  | { kind: 'fragment'; status: number; body: Html }
  | { kind: 'redirect'; to: string }
  | { kind: 'handled' };

export const web = {
  page: (title: string, body: Renderable | Html, opts: PageOptions & { status?: number } = {}): WebReply => {
    const { status = 200, ...rest } = opts;
    return { kind: 'page', status, title, body: body as Html, opts: rest };
  },
  /** A piece of HTML without the shell (fetched by an island). */
  fragment: (body: Html, status = 200): WebReply => ({ kind: 'fragment', status, body }),
  /** 303 See Other: after a form, the browser GETs the page. */
  redirect: (to: string): WebReply => ({ kind: 'redirect', to }),
  handled: (): WebReply => ({ kind: 'handled' }),
};

/** The value of a form field as text (the first of a repeated one; '' when absent). */
export function field(values: FormState['values'], name: string): string {
  const v = values[name];
  return (Array.isArray(v) ? v[0] : v) ?? '';
}

/** Every value of a repeated form field (checkboxes). */
export function fieldList(values: FormState['values'], name: string): string[] {
  const v = values[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

/** A whole number from a path segment (`:id`): anything else names nothing (the 404 page). */
export function idParam(v: string | undefined): number {
  if (v === undefined || !/^[1-9]\d{0,14}$/.test(v)) throw ApiError.notFound('page');
  return Number(v);
}
