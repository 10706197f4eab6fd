import type { Request, Response } from 'express';
import { z } from 'zod';

const QUERY_INTS = new WeakMap<z.ZodType, z.ZodType>();

/**
 * An integer query parameter: decimal digits, then `n`'s rules. Unlike `z.coerce.number()`, an
 * empty value (`?wait=`) is a 400, not 0. The OpenAPI document shows it as the integer `n`.
 */
export function queryInt<S extends z.ZodType<number, number>>(n: S) {
  const s = z.string().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(n);
  QUERY_INTS.set(s, n);
  return s;
}

/** The integer schema a `queryInt` documents itself as (undefined for any other schema). */
export function queryIntTarget(s: unknown): z.ZodType | undefined {
  return typeof s === 'object' && s !== null ? QUERY_INTS.get(s as z.ZodType) : undefined;
}

/** `page` >= 1 (default 1); `per_page` 1..max (default `def`), values above `max` are clamped to `max`. */
export function pageQuery(def = 30, max = 100) {
  return z.object({
    page: queryInt(z.int().min(1)).default(1),
    per_page: queryInt(z.int().min(1))
      .default(def)
      .transform((n) => Math.min(n, max)),
  });
}
export type PageQuery = { page: number; per_page: number };

/** Where a page sits in its list: what the `Link` and `X-Total-Count` headers are made of. */
export type PageInfo = { total: number; page: number; perPage: number };
export type Page<T> = PageInfo & { items: T[] };

export function offsetOf(q: PageQuery): number {
  return (q.page - 1) * q.per_page;
}

const pagination = z
  .object({ page: z.int().min(1), per_page: z.int().min(1), total: z.int().min(0) })
  .meta({ id: 'Pagination' });

/** The list envelope `{data, pagination: {page, per_page, total}}` around an item schema. */
export function listEnvelope<S extends z.ZodType>(item: S) {
  return z.object({ data: z.array(item), pagination });
}

/** Sets `X-Total-Count` and an RFC 8288 `Link` header (first, prev, next, last). */
export function setPageHeaders(req: Request, res: Response, baseUrl: string, page: PageInfo): void {
  res.setHeader('X-Total-Count', String(page.total));
  const last = Math.max(1, Math.ceil(page.total / page.perPage));
  const link = (n: number, rel: string): string => {
    const url = new URL(req.originalUrl, `${baseUrl}/`);
    url.searchParams.set('page', String(n));
    url.searchParams.set('per_page', String(page.perPage));
    return `<${baseUrl}${url.pathname}${url.search}>; rel="${rel}"`;
  };
  const links = [link(1, 'first')];
  if (page.page > 1) links.push(link(Math.min(page.page - 1, last), 'prev'));
  if (page.page < last) links.push(link(page.page + 1, 'next'));
  links.push(link(last, 'last'));
  res.setHeader('Link', links.join(', '));
}
