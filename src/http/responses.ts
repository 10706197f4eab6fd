import { z } from 'zod';
import type { PageInfo } from './pagination.ts';

/** Error statuses a route can declare (the body is always the `Error` envelope). */
export type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 416 | 422 | 429 | 503;

/** A documented response header. */
export type HeaderDoc = { description: string; required: boolean; type: 'string' | 'integer' };

/** Builds the path (below the base URL) of a created resource, sent as `Location`. */
export type Locator<T> = (body: T, params: Record<string, string>) => string;

type Common<T> = {
  description: string;
  /** The route may also answer 204 without a body; the text says when. */
  noContent?: string;
  /** A `text` route may also answer 206 with one byte range (`Range`); the text says when. */
  partial?: string;
  /** A `text` route may also answer 302 to `Location`; the text says when. */
  redirect?: string;
  /**
   * The answer carries a strong `ETag` (made of what this text says) and a matching
   * `If-None-Match` gets 304 without a body (`unchanged`, `reply.notModified`).
   */
  etag?: string;
  location?: Locator<T>;
  headers?: Record<string, HeaderDoc>;
};

/**
 * A route's success response. `T` is the type of its schema: the route's handler must return a
 * `Reply<T>`, so the handler, its mapper and the document describe the same shape.
 */
export type Success<T> = Common<T> &
  (
    | { kind: 'data'; status: 200 | 201 | 202; schema: z.ZodType<T> }
    | { kind: 'list'; schema: z.ZodType<T> }
    | { kind: 'bare'; status: 200 | 201; schema: z.ZodType<T>; paged?: (body: T) => PageInfo }
    | { kind: 'empty' }
    | { kind: 'text'; contentType: string | readonly string[] }
  );

type Opts<T> = Omit<Common<T>, 'description'>;
type Out<S extends z.ZodType> = z.output<S>;

export const respond = {
  /** 200 `{data: schema}`. */
  data: <S extends z.ZodType>(schema: S, description: string, opts: Opts<Out<S>> = {}): Success<Out<S>> => ({
    kind: 'data',
    status: 200,
    schema: schema as z.ZodType<Out<S>>,
    description,
    ...opts,
  }),
  /** 201 `{data: schema}`, with `Location` when the created resource has a URL of its own. */
  created: <S extends z.ZodType>(
    schema: S,
    description: string,
    location?: Locator<Out<S>>,
  ): Success<Out<S>> => ({
    kind: 'data',
    status: 201,
    schema: schema as z.ZodType<Out<S>>,
    description,
    ...(location === undefined ? {} : { location }),
  }),
  /** 202 `{data: schema}`: the work was queued and happens after the response. */
  accepted: <S extends z.ZodType>(schema: S, description: string): Success<Out<S>> => ({
    kind: 'data',
    status: 202,
    schema: schema as z.ZodType<Out<S>>,
    description,
  }),
  /** 200 `{data: [item], pagination: {page, per_page, total}}` with `Link` and `X-Total-Count`. */
  list: <S extends z.ZodType>(item: S, description: string, opts: Opts<Out<S>> = {}): Success<Out<S>> => ({
    kind: 'list',
    schema: item as z.ZodType<Out<S>>,
    description,
    ...opts,
  }),
  /** The schema itself as the body (no `data` envelope); `paged` adds `Link` and `X-Total-Count`. */
  bare: <S extends z.ZodType>(
    schema: S,
    description: string,
    opts: Opts<Out<S>> & { status?: 200 | 201; paged?: (body: Out<S>) => PageInfo } = {},
  ): Success<Out<S>> => ({
    kind: 'bare',
    schema: schema as z.ZodType<Out<S>>,
    description,
    ...opts,
    status: opts.status ?? 200,
  }),
  /** 204 without a body. */
  empty: (description: string): Success<never> => ({ kind: 'empty', description }),
  /** A body the handler writes itself (plain text, streams), of one of the content types. */
  text: (
    contentType: string | readonly string[],
    description: string,
    headers?: Record<string, HeaderDoc>,
    opts: Pick<Common<never>, 'partial' | 'redirect' | 'etag'> = {},
  ): Success<never> => ({
    kind: 'text',
    contentType,
    description,
    ...(headers === undefined ? {} : { headers }),
    ...opts,
  }),
};

/** `/api/v1/a/b/...` with every segment percent-encoded: for `Location`. */
export function apiPath(...segments: (string | number)[]): string {
  return `/api/v1/${segments.map((s) => encodeURIComponent(String(s))).join('/')}`;
}

/** An RFC 3339 UTC timestamp in a response. */
export const timestamp = z.string().meta({ format: 'date-time' });
