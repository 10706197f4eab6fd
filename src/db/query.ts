import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from './sql.ts';

/**
 * The entity manager a repository function runs on: the request's, or a transaction's (pass the
 * `tx` of `em.transactional`, so the statement is part of it).
 */
export type Db = EntityManager;

/** The first row of a query, or undefined when it returns none. */
export async function first<T>(db: Db, sql: string, params: readonly unknown[] = []): Promise<T | undefined> {
  const rows = await db.execute<T[]>(sql, [...params]);
  return rows[0];
}

/**
 * The one row a query must return (an insert or update `returning`, an aggregate): a missing row
 * is a bug, not a client error, so it throws a plain Error (a 500).
 */
export async function one<T>(db: Db, sql: string, params: readonly unknown[] = []): Promise<T> {
  const row = await first<T>(db, sql, params);
  if (row === undefined) throw new Error(`expected a row from: ${sql.trim().split('\n')[0] ?? ''}`);
  return row;
}

/** `select count(*) as n ...` as a number (PostgreSQL's bigint count arrives as a string). */
export async function count(db: Db, sql: string, params: readonly unknown[] = []): Promise<number> {
  const row = await first<{ n: string | number }>(db, sql, params);
  return Number(row?.n ?? 0);
}

/**
 * Names by id for a batch of ids, from a query `select id, name ... where id = any(?::int[])`
 * (ids that name no row are absent from the map; no query for an empty batch).
 */
export async function namesById(db: Db, sql: string, ids: readonly number[]): Promise<Map<number, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db.execute<{ id: number; name: string }[]>(sql, [intArray(ids)]);
  return new Map(rows.map((r) => [r.id, r.name]));
}

/** `?, ?, ?`: one placeholder per value, for `in (...)` lists. */
export function placeholders(values: readonly unknown[]): string {
  return values.map(() => '?').join(', ');
}
