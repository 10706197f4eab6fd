import { z } from 'zod';

/**
 * Request-side schema pieces shared by the features, each stating in the OpenAPI document the
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
