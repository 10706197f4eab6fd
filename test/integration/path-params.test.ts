import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { newAgent } from '../helpers/ci.ts';
import { startTestServer, uniq, type Client, type TestServer } from '../helpers/server.ts';

/**
 * Numeric path parameters (`:number`, `:id`) have one parser in the route table: digits or the
 * route does not match, and a number no row can have (past PostgreSQL's integer) names nothing.
 * Every operation the OpenAPI document lists with an integer path parameter is called here, so a
 * new route is covered as soon as it is declared.
 */

let s: TestServer;
let agent: Client;
let org: string;
let repo: string;
beforeAll(async () => {
  s = await startTestServer();
  agent = await newAgent(s);
  org = uniq('params');
  repo = uniq('r');
  expect((await s.admin.post('/api/v1/orgs', { name: org })).status).toBe(201);
  expect((await s.admin.post(`/api/v1/orgs/${org}/repos`, { name: repo, vcs: 'git' })).status).toBe(201);
});
afterAll(async () => {
  await s.close();
});

/** A valid body for the operations that require one (else its 400 would come first). */
const BODIES: Record<string, unknown> = {
  createComment: { body: 'a comment' },
  createPullComment: { body: 'a comment' },
  addIssueLabel: { name: 'bug' },
  addIssueAssignee: { user_id: 1 },
  reportStepStatus: { status: 'running' },
  reportPipelineStatus: { status: 'running' },
  appendStepLog: 'log line\n',
};

type Operation = { method: string; path: string; operationId: string; hasBody: boolean };

async function integerParamOperations(): Promise<Operation[]> {
  const doc = (await s.anon.get('/api/v1/openapi.json')).body as {
    paths: Record<string, Record<string, any>>;
  };
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const params: any[] = op.parameters ?? [];
      if (!params.some((p) => p.in === 'path' && p.schema?.type === 'integer')) continue;
      ops.push({
        method: method.toUpperCase(),
        path,
        operationId: op.operationId,
        hasBody: 'requestBody' in op,
      });
    }
  }
  return ops;
}

/** The operation's path with `value` for every integer parameter and real names for the others. */
function concrete(path: string, value: string): string {
  return path
    .replace('{org}', org)
    .replace('{repo}', repo)
    .replace('{username}', 'root')
    .replace(/\{(number|id)\}/g, value)
    .replace(/\{[a-z_]+\}/g, 'x');
}

async function call(op: Operation, value: string) {
  const client = op.path.startsWith('/api/v1/ci/') ? agent : s.admin;
  const body = op.hasBody ? (BODIES[op.operationId] ?? {}) : undefined;
  return client.request(op.method, concrete(op.path, value), body);
}

describe('numeric path parameters', () => {
  test('the document lists the numeric routes of issues, pipelines, the agent protocol and tokens', async () => {
    const ids = (await integerParamOperations()).map((o) => o.operationId);
    for (const id of ['getIssue', 'createComment', 'removeIssueAssignee', 'getPipeline', 'getStepLog']) {
      expect(ids).toContain(id);
    }
    for (const id of ['reportStepStatus', 'appendStepLog', 'deleteToken']) expect(ids).toContain(id);
  });

  test('a number past what the database holds answers 404 not_found on every numeric route', async () => {
    for (const op of await integerParamOperations()) {
      const r = await call(op, '99999999999');
      expect({ op: op.operationId, status: r.status, code: r.body?.error?.code }).toEqual({
        op: op.operationId,
        status: 404,
        code: 'not_found',
      });
    }
  });

  test('a value that is not digits does not match the route: 404 not_found', async () => {
    for (const op of await integerParamOperations()) {
      for (const value of ['abc', '-1', '1.5']) {
        const r = await call(op, value);
        expect({ op: op.operationId, value, status: r.status, code: r.body?.error?.code }).toEqual({
          op: op.operationId,
          value,
          status: 404,
          code: 'not_found',
        });
      }
    }
  });
});
