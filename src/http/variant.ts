/**
 * The API variant at the HTTP edge (docs/api-variants.md). Which variant a request is answered in:
 * its `X-Svc-Api-Variant` header, else the variant its token pins, else the server's
 * `TRIAD_API_VARIANT`; every answer under /api/ names it in `X-Svc-Api-Variant`. A route states
 * how it differs in the earlier variant once, in its declaration (`earlier`): absent there (404),
 * another body or query parsed into the current one's form, another response shape made from the
 * current one by a presenter. Handlers and services keep working on the one current model.
 */
import type { RequestHandler, Response } from 'express';
import type { z } from 'zod';
import { isApiVariant, type ApiVariant } from '../domain/variant.ts';
import type { Principal } from './auth.ts';
import { ApiError } from './errors.ts';
import type { Success } from './responses.ts';

export const VARIANT_HEADER = 'X-Svc-Api-Variant';

type Chosen = { requested: ApiVariant | undefined; fallback: ApiVariant };

/**
 * Reads `X-Svc-Api-Variant` of an /api/ request (`current` or `earlier`, any letter case; anything
 * else is 400 `bad_request`) and answers in it, or in the server's default, until the caller is
 * known (a request whose token fails to authenticate is answered so).
 */
export function variantHeader(serverDefault: ApiVariant): RequestHandler {
  return (req, res, next) => {
    res.setHeader(VARIANT_HEADER, serverDefault);
    const raw = req.headers['x-svc-api-variant'];
    let requested: ApiVariant | undefined;
    if (raw !== undefined) {
      const v = (Array.isArray(raw) ? raw.join(',') : raw).trim().toLowerCase();
      if (!isApiVariant(v)) {
        throw ApiError.badRequest(`${VARIANT_HEADER} must be "current" or "earlier"`);
      }
      requested = v;
      res.setHeader(VARIANT_HEADER, v);
    }
    const chosen: Chosen = { requested, fallback: serverDefault };
    res.locals.apiVariant = chosen;
    next();
  };
}

/**
 * The variant of a request whose caller is `principal` (header, then the token's pin, then the
 * server's default), also set as the answer's `X-Svc-Api-Variant`. Outside /api/ (web pages, clone
 * URLs) always the current variant.
 */
export function variantFor(res: Response, principal: Principal): ApiVariant {
  const chosen = res.locals.apiVariant as Chosen | undefined;
  if (chosen === undefined) return 'current';
  const pinned = principal.kind === 'user' ? (principal.grant.apiVariant ?? undefined) : undefined;
  const variant = chosen.requested ?? pinned ?? chosen.fallback;
  res.setHeader(VARIANT_HEADER, variant);
  return variant;
}

/** A response shape of the earlier variant, made from the current one's value by `present`. */
export type Shaped<T> = { schema: z.ZodType; present: (value: T) => unknown };

/** `present` turns a value of the current shape into one of `schema` (checked by the compiler). */
export function shaped<T, S extends z.ZodType>(schema: S, present: (value: T) => z.output<S>): Shaped<T> {
  return { schema, present };
}

/**
 * How a route differs in the earlier variant: `'absent'` (it answers 404 there, and the earlier
 * OpenAPI document leaves it out), or any of another summary, request body or query (each parses
 * into the current form the handler takes) and response shape.
 */
export type EarlierForm<B, Q, T> =
  | 'absent'
  | {
      summary?: string;
      body?: z.ZodType<B>;
      query?: z.ZodType<Q>;
      returns?: Shaped<T>;
    };

/** The parts of a route declaration a variant can change. */
type Variable = {
  summary: string;
  body?: z.ZodType | undefined;
  query?: z.ZodType | undefined;
  returns: Success<unknown>;
  earlier?: EarlierForm<unknown, unknown, unknown> | undefined;
};

/**
 * The route as it is in `variant`: undefined when absent there; otherwise its summary, body,
 * query and success schema in that variant (the success envelope, status and headers stay).
 */
export function routeIn<R extends Variable>(r: R, variant: ApiVariant): R | undefined {
  const e = r.earlier;
  if (variant === 'current' || e === undefined) return r;
  if (e === 'absent') return undefined;
  const ok = r.returns;
  const returns =
    e.returns !== undefined && (ok.kind === 'data' || ok.kind === 'list' || ok.kind === 'bare')
      ? { ...ok, schema: e.returns.schema }
      : ok;
  return {
    ...r,
    summary: e.summary ?? r.summary,
    body: e.body ?? r.body,
    query: e.query ?? r.query,
    returns,
  };
}

/** The presenter of a route's answers in `variant` (undefined: the current shape as it is). */
export function presenterIn(
  r: Pick<Variable, 'earlier'>,
  variant: ApiVariant,
): ((value: unknown) => unknown) | undefined {
  const e = r.earlier;
  if (variant === 'current' || e === undefined || e === 'absent') return undefined;
  return e.returns?.present;
}

/** `o` without the fields `keys` (a presenter dropping what its variant does not show). */
export function omit<T extends object, K extends keyof T>(o: T, ...keys: K[]): Omit<T, K> {
  const out = { ...o };
  for (const k of keys) delete out[k];
  return out;
}
