/**
 * A PostgreSQL array literal for a `?::text[]` parameter. MikroORM expands a JS array
 * parameter into a list (`?, ?`), so arrays travel as one literal string instead.
 */
export function textArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}

const PG_TIMESTAMP =
  /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(\.\d+)?(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?|Z)?( BC)?$/;

/** PostgreSQL's text form of a UTC `timestamptz` with a four-digit year (`2026-11-25 15:20:00.123456+00`). */
const PG_UTC = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;

/**
 * A `timestamptz` as read through MikroORM (PostgreSQL's text form, e.g.
 * `0020-02-29 00:00:00+00`) or a Date, as an ISO 8601 UTC string. JavaScript's own date parser
 * does not read that text form for years before 100 or with second offsets, so it is parsed here.
 */
export function isoTime(v: Date | string): string {
  if (v instanceof Date) return v.toISOString();
  // The common form (a UTC session, a four-digit year) is rewritten as text, without Dates: a
  // page of issues has sixty of them.
  const utc = PG_UTC.exec(v);
  if (utc !== null) return `${utc[1]}T${utc[2]}.${(utc[3] ?? '').padEnd(3, '0').slice(0, 3)}Z`;
  const m = PG_TIMESTAMP.exec(v);
  if (m === null) return new Date(v).toISOString();
  const [, y, mo, d, h, mi, s, frac, sign, oh, om, os, bc] = m;
  const t = new Date(0);
  t.setUTCFullYear(bc === undefined ? Number(y) : 1 - Number(y), Number(mo) - 1, Number(d));
  t.setUTCHours(Number(h), Number(mi), Number(s), Math.floor(Number(frac ?? 0) * 1000));
  const offset = (Number(oh ?? 0) * 3600 + Number(om ?? 0) * 60 + Number(os ?? 0)) * 1000;
  return new Date(t.getTime() - (sign === '-' ? -offset : offset)).toISOString();
}

/** A PostgreSQL integer array literal for a `?::int[]` parameter (see `textArray`). */
export function intArray(ids: readonly number[]): string {
  return `{${ids.map((n) => Math.trunc(n)).join(',')}}`;
}

/** Escapes LIKE wildcards so a value matches as a plain substring (`\` is PostgreSQL's default escape). */
export function likeEscape(s: string): string {
  return s.replace(/[\\%_]/g, (m) => `\\${m}`);
}

/** A positive value that fits a PostgreSQL `integer` (path numbers and ids): anything else names no row. */
export function isDbId(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 1 && n <= 2_147_483_647;
}

/** Did a statement fail on a unique index (SQLSTATE 23505)? */
export function isUniqueViolation(e: unknown): boolean {
  return typeof e === 'object' && e !== null && 'code' in e && e.code === '23505';
}

/** Did a statement fail on a foreign key, e.g. a parent row deleted meanwhile (SQLSTATE 23503)? */
export function isForeignKeyViolation(e: unknown): boolean {
  return typeof e === 'object' && e !== null && 'code' in e && e.code === '23503';
}
