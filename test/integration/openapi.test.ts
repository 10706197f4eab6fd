import http from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Validator } from '@seriousme/openapi-schema-validator';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { serverWithOrg } from '../helpers/factories.ts';
import { ResponseChecker, type OpenApiDoc } from '../helpers/openapi-check.ts';
import { checkedResponses } from '../helpers/validate-responses.ts';
import { commitFiles, gitRepo, TWO_STEPS } from '../helpers/ci.ts';
import { ok } from '../helpers/vcs.ts';

type Op = {
  operationId: string;
  parameters: { name: string; in: string }[];
  requestBody?: unknown;
  responses: Record<
    string,
    { headers?: Record<string, unknown>; content?: Record<string, { schema: unknown }> }
  >;
};

let s: TestServer;
let owner: TestUser;
let org: string;
let doc: OpenApiDoc & { components: { schemas: Record<string, any> } };
const ops: [string, string, Op][] = [];

beforeAll(async () => {
  ({ s, owner, org } = await serverWithOrg());
  doc = (await s.anon.get('/api/v1/openapi.json')).body;
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) ops.push([method, path, op as unknown as Op]);
  }
});
afterAll(async () => {
  await s.close();
});

/** A raw request (fetch refuses TRACE, and this must not follow redirects or add headers). */
function raw(method: string, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>(
    (resolve, reject) => {
      const req = http.request(`${s.url}${path}`, { method, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    },
  );
}

describe('the OpenAPI document', () => {
  test('is a valid OpenAPI 3.1 document with a unique camelCase operationId per operation', async () => {
    const v = new Validator();
    const r = await v.validate(doc);
    expect(r.errors).toBeUndefined();
    expect(r.valid).toBe(true);
    const ids = ops.map(([, , op]) => op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z0-9]*$/);
    expect(ops.length).toBeGreaterThanOrEqual(51);
  });

  test('every operation declares its success response with a schema, and its errors with the Error envelope', () => {
    for (const [method, path, op] of ops) {
      const where = `${method} ${path}`;
      const statuses = Object.keys(op.responses);
      expect({ where, default: statuses.includes('default') }).toEqual({ where, default: false });
      const success = statuses.filter((c) => c.startsWith('2'));
      expect({ where, success: success.length > 0 }).toEqual({ where, success: true });
      for (const c of success) {
        const content = op.responses[c]!.content;
        if (c === '204') expect({ where, content }).toEqual({ where, content: undefined });
        else {
          const [type, media] = Object.entries(content ?? {})[0] ?? [];
          expect({ where, type }).toEqual({ where, type: expect.any(String) });
          if (type === 'application/json') {
            expect({ where, schema: Object.keys(media!.schema as object).length > 0 }).toEqual({
              where,
              schema: true,
            });
          }
        }
      }
      for (const c of statuses.filter((x) => x.startsWith('4') || x.startsWith('5'))) {
        expect({ where, c, schema: op.responses[c]!.content?.['application/json']?.schema }).toEqual({
          where,
          c,
          schema: { $ref: '#/components/schemas/Error' },
        });
      }
      if (path.startsWith('/api/')) {
        expect({ where, has401: statuses.includes('401') }).toEqual({ where, has401: true });
        expect(op.responses['401']!.headers).toHaveProperty('WWW-Authenticate');
      }
      if (path.includes('{'))
        expect({ where, has404: statuses.includes('404') }).toEqual({ where, has404: true });
      if (op.requestBody !== undefined) {
        expect({
          where,
          body: ['400', '413'].every((x) => statuses.includes(x)) || statuses.includes('413'),
        }).toEqual({
          where,
          body: true,
        });
      }
    }
  });

  test('enumerations are enums: severity, issue state, statuses, roles, scopes, error codes', () => {
    const schemas = doc.components.schemas;
    expect(schemas.Severity).toEqual({ type: 'string', enum: ['none', 'low', 'medium', 'high', 'critical'] });
    expect(schemas.Issue.properties.severity).toEqual({ $ref: '#/components/schemas/Severity' });
    expect(schemas.IssueState.enum).toEqual(['new', 'open', 'closed']);
    expect(schemas.PipelineStatus.enum).toEqual([
      'pending',
      'running',
      'success',
      'failure',
      'cancelled',
      'error',
    ]);
    expect(schemas.StepStatus.enum).toContain('skipped');
    expect(schemas.Vcs.enum).toEqual(['hg', 'git', 'fossil']);
    expect(schemas.Role.enum).toEqual(['owner', 'member']);
    expect(schemas.Token.properties.scopes.items.enum).toContain('issues:write');
    expect(schemas.Error.properties.error.properties.code.enum).toEqual(
      expect.arrayContaining(['not_found', 'validation_failed', 'method_not_allowed']),
    );
    const create = doc.paths['/api/v1/repos/{org}/{repo}/issues']!.post as unknown as {
      requestBody: { content: { 'application/json': { schema: any } } };
    };
    expect(create.requestBody.content['application/json'].schema.properties.severity.enum).toEqual([
      'none',
      'low',
      'medium',
      'high',
      'critical',
    ]);
  });

  test('the poll declares its job and its 204; lists their envelope and headers; 201s their Location; the log its text', () => {
    const poll = doc.paths['/api/v1/ci/poll']!.post as unknown as Op;
    expect(poll.responses['200']!.content!['application/json']!.schema).toEqual({
      $ref: '#/components/schemas/Job',
    });
    expect(poll.responses['204']).toBeDefined();
    const issues = doc.paths['/api/v1/repos/{org}/{repo}/issues']!.get as unknown as Op;
    expect(issues.responses['200']!.headers).toEqual(
      expect.objectContaining({ Link: expect.anything(), 'X-Total-Count': expect.anything() }),
    );
    expect(issues.responses['200']!.content!['application/json']!.schema).toEqual({
      type: 'object',
      properties: {
        data: { type: 'array', items: { $ref: '#/components/schemas/Issue' } },
        pagination: { $ref: '#/components/schemas/Pagination' },
      },
      required: ['data', 'pagination'],
    });
    const pipelines = doc.paths['/api/v1/repos/{org}/{repo}/pipelines']!.get as unknown as Op;
    expect(pipelines.responses['200']!.headers).toHaveProperty('X-Total-Count');
    for (const [p, m] of [
      ['/api/v1/orgs', 'post'],
      ['/api/v1/orgs/{org}/repos', 'post'],
      ['/api/v1/repos/{org}/{repo}/issues', 'post'],
      ['/api/v1/user/tokens', 'post'],
      ['/api/v1/repos/{org}/{repo}/pipelines/{number}/rerun', 'post'],
    ] as const) {
      expect((doc.paths[p]![m] as unknown as Op).responses['201']!.headers).toHaveProperty('Location');
    }
    const created = (doc.paths['/api/v1/repos/{org}/{repo}/issues']!.post as any).responses['201'];
    expect(created.links.getIssue).toEqual({
      operationId: 'getIssue',
      parameters: {
        org: '$request.path.org',
        repo: '$request.path.repo',
        number: '$response.body#/data/number',
      },
    });
    const log = doc.paths['/api/v1/repos/{org}/{repo}/pipelines/{number}/steps/{step}/log']!
      .get as unknown as Op;
    expect(Object.keys(log.responses['200']!.content!)).toEqual(['text/plain; charset=utf-8']);
    expect(log.responses['200']!.headers).toHaveProperty('X-Svc-Step-Name');
  });
});

describe('the response check of the test suite', () => {
  const headers = (h: Record<string, string> = {}) =>
    new Headers({
      'content-type': 'application/json',
      'x-request-id': 'r',
      'x-svc-api-variant': 'current',
      ...h,
    });
  const user = {
    id: 1,
    username: 'u',
    email: 'u@x',
    display_name: 'U',
    is_admin: false,
    avatar_url: '',
    created_at: '2026-01-01T00:00:00.000Z',
  };

  test('reports a missing field, an undocumented field, a wrong enum value, an undeclared status or header', () => {
    const c = new ResponseChecker(doc);
    const body = (b: unknown) => JSON.stringify(b);
    expect(c.check('GET', '/api/v1/user', 200, headers(), body({ data: user }))).toBeUndefined();
    const noEmail: Record<string, unknown> = { ...user };
    delete noEmail.email;
    expect(c.check('GET', '/api/v1/user', 200, headers(), body({ data: noEmail }))).toMatch(/email/);
    expect(c.check('GET', '/api/v1/user', 200, headers(), body({ data: { ...user, extra: 1 } }))).toMatch(
      /additional/,
    );
    expect(
      c.check('GET', '/api/v1/user', 500, headers(), body({ error: { code: 'internal', message: 'x' } })),
    ).toMatch(/not declared/);
    expect(
      c.check('GET', '/api/v1/user', 401, headers(), body({ error: { code: 'nope', message: 'x' } })),
    ).toMatch(/allowed values|WWW-Authenticate/);
    expect(c.check('GET', '/API/V1/USER/', 200, headers(), body({ data: user }))).toBeUndefined();
    expect(
      c.check(
        'GET',
        '/api/v1/orgs/o/repos',
        200,
        headers(),
        body({ data: [], pagination: { page: 1, per_page: 30, total: 0 } }),
      ),
    ).toMatch(/Link/);
    expect(
      c.check(
        'DELETE',
        '/api/v1/user',
        405,
        headers({ allow: 'GET' }),
        body({ error: { code: 'method_not_allowed', message: 'x' } }),
      ),
    ).toBeUndefined();
    expect(
      c.check('DELETE', '/api/v1/user', 404, headers(), body({ error: { code: 'not_found', message: 'x' } })),
    ).toMatch(/405/);
  });

  test('every response a test receives from the server goes through the check', async () => {
    const before = checkedResponses();
    await s.anon.get('/api/v1/orgs/nope');
    await owner.client.get('/api/v1/user');
    expect(checkedResponses()).toBe(before + 2);
  });
});

describe('REST conventions', () => {
  test('an API 401 challenges with Bearer (invalid_token when one was sent); a clone URL keeps Basic', async () => {
    const none = await s.anon.get('/api/v1/user');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="triad"');
    const bad = await s.anon.as('nope').get('/api/v1/orgs');
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toBe('Bearer realm="triad", error="invalid_token"');
    const repo = await owner.client.post(`/api/v1/orgs/${org}/repos`, {
      name: 'secret',
      vcs: 'git',
      is_private: true,
    });
    expect(repo.status).toBe(201);
    const clone = await raw('GET', `/${org}/secret/info/refs?service=git-upload-pack`);
    expect(clone.status).toBe(401);
    expect(clone.headers['www-authenticate']).toMatch(/^Basic /);
  });

  test('a known API path with another method answers 405 with Allow; OPTIONS 204 with Allow; TRACE never 500', async () => {
    const del = await owner.client.delete('/api/v1/user');
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expect(del.body.error.code).toBe('method_not_allowed');
    const put = await owner.client.put(`/api/v1/repos/${org}/secret/issues/labels`, {});
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    const tokens = await owner.client.request('PATCH', '/api/v1/user/tokens/1', {});
    expect(tokens.headers.get('allow')).toBe('DELETE, OPTIONS');
    const options = await raw('OPTIONS', '/api/v1/orgs/x/repos');
    expect(options.status).toBe(204);
    expect(options.headers.allow).toBe('GET, HEAD, POST, OPTIONS');
    const trace = await raw('TRACE', '/api/v1/user');
    expect(trace.status).toBe(405);
    expect(JSON.parse(trace.body).error.code).toBe('method_not_allowed');
    for (const path of ['/api/v1/nothing', `/${org}/secret`, `/${org}/secret/info/refs`, '/healthz', '/']) {
      for (const method of ['TRACE', 'PROPFIND', 'OPTIONS']) {
        const r = await raw(method, path);
        expect({ method, path, status: r.status < 500 }).toEqual({ method, path, status: true });
      }
    }
    const unknown = await owner.client.get('/api/v1/nothing/here');
    expect(unknown.status).toBe(404);
  });

  test('201 responses carry Location, the URL of the created resource', async () => {
    const follow = async (loc: string | null) => {
      expect(loc).toMatch(/^http:\/\/localhost:\d+\/api\/v1\//);
      const r = await owner.client.get(new URL(loc!).pathname);
      expect(r.status).toBe(200);
      return r;
    };
    const o = await owner.client.post('/api/v1/orgs', { name: `${org}-loc` });
    expect(o.headers.get('location')).toBe(
      `${new URL(o.headers.get('location')!).origin}/api/v1/orgs/${org}-loc`,
    );
    expect((await follow(o.headers.get('location'))).body.data.id).toBe(o.body.data.id);
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: 'located' });
    expect((await follow(r.headers.get('location'))).body.data.id).toBe(r.body.data.id);
    const i = await owner.client.post(`/api/v1/repos/${org}/located/issues`, { title: 'where' });
    const issue = await follow(i.headers.get('location'));
    expect(issue.body.data.number).toBe(i.body.data.number);
    const u = await s.admin.post('/api/v1/admin/users', {
      username: 'located-user',
      email: 'l@example.test',
    });
    const got = await s.admin.get(new URL(u.headers.get('location')!).pathname);
    expect(got.body.data.id).toBe(u.body.data.id);
    const t = await owner.client.post('/api/v1/user/tokens', { name: 'loc', scopes: ['repo:read'] });
    expect(t.status).toBe(201);
    const gone = await owner.client.delete(new URL(t.headers.get('location')!).pathname);
    expect(gone.status).toBe(204);
  });

  test('the pipeline list keeps its envelope and adds Link and X-Total-Count; a rerun answers 201 with Location', async () => {
    const repo = await gitRepo(s, owner, org);
    for (const n of [1, 2, 3]) {
      await commitFiles(repo, { '.pipeline.yml': TWO_STEPS, 'n.txt': String(n) }, `ci ${n}`);
      await repo.push();
    }
    const base = `/api/v1/repos/${org}/${repo.name}/pipelines`;
    const page = await s.anon.get(`${base}?per_page=2`);
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ total: 3, page: 1, per_page: 2 });
    expect(page.headers.get('x-total-count')).toBe('3');
    expect(page.headers.get('link')).toContain(`${base}?per_page=2&page=2>; rel="next"`);
    const rerun = await owner.client.post(`${base}/1/rerun`);
    expect(rerun.status).toBe(201);
    expect(new URL(rerun.headers.get('location')!).pathname).toBe(`${base}/${rerun.body.number}`);
  });

  test('a revision with "/" (a git branch feature/x) is accepted by the changeset read, plain or encoded', async () => {
    const repo = await gitRepo(s, owner, org);
    await commitFiles(repo, { 'a.txt': 'a\n' }, 'first');
    await repo.push();
    await ok('git', ['checkout', '-q', '-b', 'feature/x'], repo.work);
    const sha = await commitFiles(repo, { 'b.txt': 'b\n' }, 'on a branch');
    await repo.push('feature/x');
    const base = `/api/v1/repos/${org}/${repo.name}/changeset`;
    const plain = await s.anon.get(`${base}/feature/x`);
    expect(plain.status).toBe(200);
    expect(plain.body.data).toMatchObject({ id: sha, subject: 'on a branch' });
    const encoded = await s.anon.get(`${base}/feature%2Fx`);
    expect(encoded.status).toBe(200);
    expect(encoded.body.data.id).toBe(sha);
    expect((await s.anon.get(`${base}/feature/nothing`)).status).toBe(404);
  });

  test('an issues:read token does not list the private repositories it cannot read', async () => {
    const member = await s.newUser();
    await s.addMember(org, member);
    const issuesOnly = await owner.client.as(member.token).post('/api/v1/user/tokens', {
      name: 'issues only',
      scopes: ['issues:read'],
    });
    expect(issuesOnly.status).toBe(201);
    const names = async (token: string) =>
      (await s.anon.as(token).get(`/api/v1/orgs/${org}/repos?per_page=100`)).body.data.map(
        (r: { name: string }) => r.name,
      );
    expect(await names(member.token)).toContain('secret');
    expect(await names(issuesOnly.body.data.token)).not.toContain('secret');
    expect((await s.anon.as(issuesOnly.body.data.token).get(`/api/v1/repos/${org}/secret`)).status).toBe(403);
    expect(
      (await s.anon.as(issuesOnly.body.data.token).get(`/api/v1/repos/${org}/secret/issues`)).status,
    ).toBe(200);
  });
});

describe('what the schemathesis run found (bench/fuzz-openapi.sh)', () => {
  test('an agent may report any year 0002..9998 with any offset (year 20 and offset -17:11 answered 500); other years are 400', async () => {
    const repo = await gitRepo(s, owner, org);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS }, 'ci');
    await repo.push();
    const agent = s.anon.as((await s.admin.post('/api/v1/admin/agents', { name: 'years' })).body.data.token);
    const job = await agent.post('/api/v1/ci/poll');
    expect(job.status).toBe(200);
    const at = `/api/v1/ci/pipelines/${job.body.pipeline_id}/status`;
    const old = await agent.put(at, { status: 'running', started_at: '0020-02-29T00:00:00Z' });
    expect(old.status).toBe(200);
    expect(old.body.data.started_at).toBe('0020-02-29T00:00:00.000Z');
    // PostgreSQL takes offsets up to ±15:59 only (a -17:11 offset answered 500): stored as UTC.
    const offset = await agent.put(at, { status: 'running', started_at: '6645-10-19T04:44:49-17:11' });
    expect(offset.status).toBe(200);
    expect(offset.body.data.started_at).toBe('6645-10-19T21:55:49.000Z');
    for (const started_at of [
      '0000-01-01T00:00:00Z',
      '0001-01-01T00:00:00+14:00',
      '9999-12-31T23:59:00-14:00',
    ]) {
      const r = await agent.put(at, { status: 'running', started_at });
      expect({ started_at, status: r.status }).toEqual({ started_at, status: 400 });
    }
  });

  test('a method a numeric route has, on a sibling literal path, is 405 (PATCH issues/labels answered 400)', async () => {
    const r = await owner.client.patch(`/api/v1/repos/${org}/secret/issues/labels`, {});
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    expect((await owner.client.get(`/api/v1/repos/${org}/secret/issues/abc`)).status).toBe(404);
    expect((await owner.client.delete('/api/v1/user/tokens/1e3')).status).toBe(404);
  });

  test('a NUL only fails a request in a value the schema keeps (an ignored unknown key was 400)', async () => {
    const name = `${org}-nul`;
    const r = await owner.client.post('/api/v1/orgs', { name, 'x\u0000': 'ignored' });
    expect(r.status).toBe(201);
    const bad = await owner.client.post('/api/v1/orgs', { name: `${name}2`, description: 'a\u0000b' });
    expect(bad.status).toBe(400);
    expect((await s.anon.get(`/api/v1/orgs/${org}/repos?unknown=%00`)).status).toBe(200);
  });

  test('the document states the rules the server enforces on inputs', () => {
    const create = (doc.paths['/api/v1/repos/{org}/{repo}/issues']!.post as any).requestBody.content[
      'application/json'
    ].schema;
    expect(create.properties.title.pattern).toBeDefined();
    expect(new RegExp(create.properties.title.pattern).test('   ')).toBe(false);
    expect(new RegExp(create.properties.body.pattern).test('a\u0000b')).toBe(false);
    const list = (doc.paths['/api/v1/repos/{org}/{repo}/issues']!.get as any).parameters;
    const perPage = list.find((p: { name: string }) => p.name === 'per_page');
    expect(perPage.schema.maximum).toBe(Number.MAX_SAFE_INTEGER);
    const assignee = (doc.paths['/api/v1/repos/{org}/{repo}/issues/{number}/assignees']!.post as any)
      .requestBody.content['application/json'].schema;
    expect(assignee.minProperties).toBe(1);
    const changeset = (doc.paths['/api/v1/repos/{org}/{repo}/changeset/{rev}']!.get as any).parameters;
    expect(changeset.find((p: { name: string }) => p.name === 'rev').schema.pattern).toBeDefined();
  });
});

describe('integer query parameters (the fuzzer sent `?wait=`, which counted as 0)', () => {
  test('an empty or non-decimal integer query value is 400; the document shows integers with defaults', async () => {
    for (const q of ['page=', 'per_page=', 'page=+1', 'page=1.0', 'page=0x10']) {
      const r = await s.anon.get(`/api/v1/orgs/${org}/repos?${q}`);
      expect({ q, status: r.status }).toEqual({ q, status: 400 });
    }
    const agent = s.anon.as(
      (await s.admin.post('/api/v1/admin/agents', { name: 'empty-wait' })).body.data.token,
    );
    expect((await agent.post('/api/v1/ci/poll?wait=')).status).toBe(400);
    const list = (doc.paths['/api/v1/repos/{org}/{repo}/pipelines']!.get as any).parameters;
    expect(list.find((p: { name: string }) => p.name === 'per_page').schema).toEqual({
      type: 'integer',
      minimum: 1,
      maximum: Number.MAX_SAFE_INTEGER,
      default: 20,
    });
  });
});
