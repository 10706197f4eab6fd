import pg from 'pg';
import type { PushAllow } from '../../src/protection/rules.ts';
import type { TestServer } from './server.ts';

export type RuleInput = {
  pattern: string;
  fast_forward_only?: boolean;
  allow_deletion?: boolean;
  push?: PushAllow;
  require_pipeline?: boolean;
  required_contexts?: string[];
};

/**
 * Adds a protection rule to a repository straight in the test server's database (the columns of
 * `ref_protections`, migration 0024), for tests of push enforcement that do not go through the
 * API. Defaults: fast-forward only, no deletion, members push.
 */
export async function protect(s: TestServer, repoId: number, rule: RuleInput): Promise<void> {
  const c = new pg.Client({ connectionString: s.dbUrl });
  await c.connect();
  try {
    await c.query(
      `insert into ref_protections
         (repo_id, pattern, fast_forward_only, allow_deletion, push, require_pipeline, required_contexts)
       values ($1, $2, $3, $4, $5::jsonb, $6, $7::text[])`,
      [
        repoId,
        rule.pattern,
        rule.fast_forward_only ?? true,
        rule.allow_deletion ?? false,
        JSON.stringify(rule.push ?? 'members'),
        rule.require_pipeline ?? false,
        rule.required_contexts ?? [],
      ],
    );
  } finally {
    await c.end();
  }
}

/** What a refused push must leave unchanged: the repository's events (but `status`) and pipelines. */
export async function pushTraces(
  s: TestServer,
  repoId: number,
): Promise<{ events: number; pipelines: number }> {
  const c = new pg.Client({ connectionString: s.dbUrl });
  await c.connect();
  try {
    const n = async (table: string, more = '') =>
      Number(
        (await c.query(`select count(*) as n from ${table} where repo_id = $1${more}`, [repoId])).rows[0].n,
      );
    // the push's own events (a pipeline's commit status adds `status` events of its own)
    return {
      events: await n('outbox_events', ` and event_type <> 'status'`),
      pipelines: await n('pipelines'),
    };
  } finally {
    await c.end();
  }
}
