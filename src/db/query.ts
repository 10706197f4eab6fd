import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from './sql.ts';
import { statementSpan } from '../telemetry/db-spans.ts';

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

const preparedNames = new Set<string>();

/** ORM configurations whose pool goes through a transaction-mode pooler: no named statements there. */
const unprepared = new WeakSet<object>();

/**
 * Makes `Prepared` statements of this ORM run as plain statements: behind a transaction-mode
 * pooler (DATABASE_POOL_MODE=transaction) consecutive statements may reach different server
 * connections, which do not know a name prepared on another (PgBouncer before 1.21).
 */
export function plainStatementsOnly(config: object): void {
  unprepared.add(config);
}

/**
 * A fixed statement run as a named prepared statement: PostgreSQL parses and plans it once per
 * pool connection instead of at every run. For the lookups nearly every request makes (token,
 * repository, organization, membership): a repository lookup by names took 0.40 ms as a plain
 * statement and 0.16 ms prepared on a two-CPU machine. Inside a transaction it runs as a plain
 * statement on the transaction's connection. `?` are its parameters (it has no other `?`).
 * PostgreSQL fixes their types when it prepares the statement: an id beyond `int4` fails instead
 * of matching nothing, so callers pass ids that came from the database or passed `isDbId`. An
 * error comes as `pg` raises it (the ORM would wrap it with the statement's text) and the pool
 * drops the connection it happened on.
 *
 * (MikroORM's own statements are sent as text with the values written in, so PostgreSQL plans
 * each one afresh. A connection pooler in front of PostgreSQL must keep named statements per
 * client: PgBouncer from 1.21 with `max_prepared_statements`, or session pooling; with
 * DATABASE_POOL_MODE=transaction they run as plain statements, see `plainStatementsOnly`.)
 */
export class Prepared<T> {
  private readonly name: string;
  private readonly sql: string;
  private readonly text: string;

  constructor(name: string, sql: string) {
    if (preparedNames.has(name)) throw new Error(`prepared statement ${name} defined twice`);
    preparedNames.add(name);
    this.name = `triad_${name}`;
    this.sql = sql;
    let n = 0;
    this.text = sql.replace(/\?/g, () => `$${++n}`);
  }

  /** The first row, or undefined when there is none. */
  async first(db: Db, params: readonly unknown[]): Promise<T | undefined> {
    if (db.isInTransaction() || unprepared.has(db.config)) return first<T>(db, this.sql, params);
    // shown to the ORM's `onQuery` hook (which tests use to count statements); the text is fixed,
    // whatever the hook answers, and the ORM's query logger does not see it
    db.config.get('onQuery')(this.sql, params);
    // the `pg` pool behind the ORM's connection (asked each time: it connects when not yet connected)
    const pool = await db.getConnection().getNativeClient();
    const query = () => pool.query({ name: this.name, text: this.text, values: [...params] });
    const r = await statementSpan(this.sql, query, this.name);
    return r.rows[0] as T | undefined;
  }
}

/**
 * The `set` list of an update made of optional changes: `add(sql, ...values)` appends an
 * assignment and the values of its placeholders; `sql` is the list, `params` the values in order.
 */
export class Assignments {
  private readonly sets: string[];
  readonly params: unknown[] = [];

  constructor(...fixed: string[]) {
    this.sets = [...fixed];
  }

  add(sql: string, ...values: unknown[]): void {
    this.sets.push(sql);
    this.params.push(...values);
  }

  get sql(): string {
    return this.sets.join(', ');
  }
}

/**
 * Rows of a per-repository numbered table (issues, pull requests) by their numbers, in the order
 * given (numbers naming none are left out); `select` is `select <columns> from <table> <alias>`.
 */
export async function byNumbersIn<T extends { number: number }>(
  db: Db,
  select: string,
  alias: string,
  repoId: number,
  numbers: readonly number[],
): Promise<T[]> {
  if (numbers.length === 0) return [];
  const where = `${alias}.repo_id = ? and ${alias}.number = any(?::int[])`;
  const rows = await db.execute<T[]>(`${select} where ${where}`, [repoId, intArray(numbers)]);
  const byNumber = new Map(rows.map((r) => [r.number, r]));
  return numbers.flatMap((n) => {
    const r = byNumber.get(n);
    return r === undefined ? [] : [r];
  });
}
