import { z } from 'zod';

/** The schemas of a route's path parameters, by name (see `RouteDef.params`). */
export type ParamSchemas = Record<string, z.ZodType<unknown, string>>;

const PATH_INTS = new WeakSet<z.ZodType>();

/**
 * The numeric path parameter (`:number`, `:id`): decimal digits, as a number. A value that is not
 * digits does not match the route at all (404). A number past what the database holds names
 * nothing, so lookups answer it with their own 404 (see `isDbId`). The document shows an integer.
 */
export const pathInt = z.string().regex(/^\d+$/, 'must be a whole number').transform(Number);
PATH_INTS.add(pathInt);

/** Is this the numeric path parameter schema? (Routing and the document treat it as an integer.) */
export function isPathInt(s: unknown): boolean {
  return typeof s === 'object' && s !== null && PATH_INTS.has(s as z.ZodType);
}

/** A path segment naming something (an organization, a repository, a user, a label): any text. */
export const pathText = z.string().meta({ minLength: 1 });
