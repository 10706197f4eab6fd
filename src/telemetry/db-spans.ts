import type { MikroORM } from '@mikro-orm/core';
import { inSpan, SpanKind, tracingOn } from './spans.ts';

/** The connection methods every statement passes (`execute`) and the transaction boundaries. */
type Traced = {
  executeQuery<T>(query: string, cb: () => Promise<T>, ctx?: { query?: string }): Promise<T>;
  begin(options?: { ctx?: unknown }): Promise<unknown>;
  commit(ctx: unknown, ...rest: unknown[]): Promise<void>;
  rollback(ctx: unknown, ...rest: unknown[]): Promise<void>;
};

const TEXT_MAX = 2000;

/**
 * Gives every SQL statement of `orm` a client span (`SELECT repo_ref_states`, `COMMIT`…), a child
 * of the span active when it was issued. Installed on the ORM's connection only while tracing is
 * on (server.ts), so an untraced server runs MikroORM untouched. The statement text is kept with
 * its placeholders (`db.query.text`), never with the values bound to them. (The prepared lookups
 * of db/query.ts, which go to the `pg` pool directly, call `statementSpan` themselves.)
 */
export function traceQueries(orm: MikroORM): void {
  const conn = orm.em.getConnection() as unknown as Traced;
  const execute = conn.executeQuery.bind(conn);
  conn.executeQuery = (query, cb, ctx) => statementSpan(ctx?.query ?? query, () => execute(query, cb, ctx));
  const boundary = (name: 'begin' | 'commit' | 'rollback', spanName: (arg: unknown) => string) => {
    const run = (conn[name] as (...a: unknown[]) => Promise<unknown>).bind(conn);
    const attributes = { 'db.system.name': 'postgresql' };
    (conn as unknown as Record<string, unknown>)[name] = (...a: unknown[]) =>
      inSpan(spanName(a[0]), { kind: SpanKind.CLIENT, attributes }, () => run(...a));
  };
  const nested = (ctx: unknown) => typeof ctx === 'object' && ctx !== null && 'savepointName' in ctx;
  const hasCtx = (o: unknown) =>
    typeof o === 'object' && o !== null && (o as { ctx?: unknown }).ctx !== undefined;
  boundary('begin', (o) => (hasCtx(o) ? 'SAVEPOINT' : 'BEGIN'));
  boundary('commit', (c) => (nested(c) ? 'RELEASE SAVEPOINT' : 'COMMIT'));
  boundary('rollback', (c) => (nested(c) ? 'ROLLBACK TO SAVEPOINT' : 'ROLLBACK'));
}

/**
 * Runs `fn`, which sends statement `text` (with `?` placeholders), in a client span named after
 * it; `prepared`: the name of the prepared statement it runs as. Just `fn` while tracing is off.
 */
export function statementSpan<T>(text: string, fn: () => Promise<T>, prepared?: string): Promise<T> {
  if (!tracingOn()) return fn();
  const { operation, target } = describe(text);
  const attributes = {
    'db.system.name': 'postgresql',
    'db.operation.name': operation,
    ...(target === undefined ? {} : { 'db.collection.name': target }),
    'db.query.text': text.length > TEXT_MAX ? `${text.slice(0, TEXT_MAX)}…` : text,
    ...(prepared === undefined ? {} : { 'db.query.prepared': prepared }),
  };
  const name = target === undefined ? operation : `${operation} ${target}`;
  return inSpan(name, { kind: SpanKind.CLIENT, attributes }, fn);
}

/** The statement's first keyword and the table it names first (`from`, `into`, `update`), if any. */
export function describe(sql: string): { operation: string; target: string | undefined } {
  const head = /^\s*([a-z]+)/i.exec(sql);
  const operation = (head?.[1] ?? 'SQL').toUpperCase();
  const t = /\b(?:from|into|update|join)\s+("?[\w.]+"?)/i.exec(sql);
  const target = t?.[1]?.replaceAll('"', '');
  return { operation, target };
}
