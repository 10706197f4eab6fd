/**
 * What HTTP clients (browsers, generated clients, caches) rely on: a JSON route reads only
 * `application/json` (415 otherwise: a form another site posts is never a request); conditional
 * reads of contents, raw files and archives by a strong `ETag` from the resolved commit or file;
 * 416 for a range past the end of an asset; the opt-in CORS allow-list (`TRIAD_CORS_ORIGINS`),
 * never with credentials; an agent name's length checked as sent, before trimming.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { postMultipart } from '../helpers/multipart.ts';
import { PrRepo } from '../helpers/pulls.ts';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, withOrgServer } from '../helpers/factories.ts';

const ALLOWED = 'https://app.example.test';
let s: TestServer;
let owner: TestUser;
let org: string;
let repo: PrRepo;

withOrgServer({}, (w) => ({ s, owner, org } = w));
beforeAll(async () => {
  repo = await PrRepo.create(owner, org, 'git');
});

describe('JSON routes read only application/json', () => {
  test('a body of another type, or of none, is 415 and nothing is created', async () => {
    const name = uniq('org');
    const json = JSON.stringify({ name });
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      expectError(
        await owner.client.post('/api/v1/orgs', json, { 'content-type': type }),
        415,
        'unsupported_media_type',
      );
    }
    // no Content-Type at all (fetch sends a Buffer without one)
    expectError(await owner.client.post('/api/v1/orgs', Buffer.from(json)), 415, 'unsupported_media_type');
    expect((await owner.client.get(`/api/v1/orgs/${name}`)).status).toBe(404);
  });

  test('application/json with parameters is read; a charset other than UTF-8 is 415', async () => {
    const name = uniq('org');
    const r = await owner.client.post('/api/v1/orgs', JSON.stringify({ name }), {
      'content-type': 'Application/JSON; charset=utf-8',
    });
    expect(r.status).toBe(201);
    const latin = await owner.client.post('/api/v1/orgs', JSON.stringify({ name: uniq('org') }), {
      'content-type': 'application/json; charset=iso-8859-1',
    });
    expectError(latin, 415, 'unsupported_media_type');
  });

  test('a POST without a body passes whatever its Content-Type: the merge of a pull request', async () => {
    await repo.commitOn(uniq('topic'), { 'a.txt': 'a\n' }, 'topic');
    const branch = uniq('topic');
    await repo.commitOn(branch, { 'b.txt': 'b\n' }, 'topic');
    const pull = await owner.client.post(`${repo.api}/pulls`, {
      title: 't',
      source_ref: branch,
      target_ref: 'main',
    });
    expect(pull.status).toBe(201);
    const merged = await owner.client.post(`${repo.api}/pulls/${pull.body.data.number}/merge`, '', {
      'content-type': 'text/plain',
    });
    expect(merged.status).toBe(200);
    expect(merged.body.data.status).toBe('merged');
  });

  test('the routes that take raw bodies keep theirs: an asset upload is multipart', async () => {
    const tag = uniq('v');
    const rel = await owner.client.post(`${repo.api}/releases`, { tag_name: tag, target_commitish: 'main' });
    expect(rel.status).toBe(201);
    const up = await postMultipart(`${s.url}${repo.api}/releases/${rel.body.data.id}/assets`, owner.token, [
      { field: 'attachment', filename: 'a.bin', data: Buffer.from('0123456789') },
    ]);
    expect(up.status).toBe(201);
    // the name's length is checked as sent (the document's maxLength), before trimming
    const long = await postMultipart(`${s.url}${repo.api}/releases/${rel.body.data.id}/assets`, owner.token, [
      { field: 'name', value: `${'n'.repeat(255)} ` },
      { field: 'attachment', filename: 'b.bin', data: Buffer.from('x') },
    ]);
    expect({ status: long.status, code: long.body?.error?.code }).toEqual({
      status: 400,
      code: 'validation_failed',
    });
  });
});

describe('conditional reads', () => {
  let first: string;

  beforeAll(async () => {
    await repo.commitOn('main', { 'dir/file.txt': 'one\n' }, 'one');
    first = (await owner.client.get(`${repo.api}/log?per_page=1`)).body.data[0].id;
  });

  const reads = () => [
    `${repo.api}/tree?rev=main`,
    `${repo.api}/tree/dir?rev=main`,
    `${repo.api}/blob/dir/file.txt?rev=main`,
    `${repo.api}/raw/dir/file.txt?rev=main`,
    `${repo.api}/log?rev=main`,
    `${repo.api}/changeset/main`,
    `${repo.api}/archive/main.tar.gz`,
    `${repo.api}/archive/main.zip`,
  ];

  test('each answers a strong ETag, and 304 without a body to If-None-Match with it (or *)', async () => {
    const tags = new Set<string>();
    for (const p of reads()) {
      const r = await s.anon.get(p);
      expect({ p, status: r.status }).toEqual({ p, status: 200 });
      const etag = r.headers.get('etag');
      expect({ p, etag }).toEqual({ p, etag: expect.stringMatching(/^"[^"]+"$/) });
      expect(r.headers.get('cache-control')).toBe('private, no-cache');
      tags.add(etag!);
      for (const match of [etag!, `"nope", W/${etag!}`, '*']) {
        const again = await s.anon.get(p, { 'if-none-match': match });
        expect({ p, match, status: again.status, text: again.text }).toEqual({
          p,
          match,
          status: 304,
          text: '',
        });
        expect(again.headers.get('etag')).toBe(etag);
      }
      expect((await s.anon.get(p, { 'if-none-match': '"other"' })).status).toBe(200);
    }
    // the archive's format is part of its tag; the tree of the root and of dir differ by URL only
    expect(tags.size).toBeGreaterThanOrEqual(7);
  });

  test('a moving rev validates against its resolved commit: the same tag as the commit id, a new one once it moves', async () => {
    const byRev = await s.anon.get(`${repo.api}/tree?rev=main`);
    const byId = await s.anon.get(`${repo.api}/tree?rev=${first}`);
    expect(byId.headers.get('etag')).toBe(byRev.headers.get('etag'));
    const raw = await s.anon.get(`${repo.api}/raw/dir/file.txt?rev=main`);
    const archive = await s.anon.get(`${repo.api}/archive/main.tar.gz`);

    // another file changes: main moves, dir/file.txt stays the same bytes
    await repo.commitOn('main', { 'other.txt': 'two\n' }, 'two');
    const tree = await s.anon.get(`${repo.api}/tree?rev=main`, {
      'if-none-match': byRev.headers.get('etag')!,
    });
    expect(tree.status).toBe(200);
    expect(tree.body.data.map((e: { name: string }) => e.name)).toContain('other.txt');
    expect(tree.headers.get('etag')).not.toBe(byRev.headers.get('etag'));
    const a2 = await s.anon.get(`${repo.api}/archive/main.tar.gz`, {
      'if-none-match': archive.headers.get('etag')!,
    });
    expect(a2.status).toBe(200);
    // the raw file's tag is its blob's: unchanged bytes still validate
    const r2 = await s.anon.get(`${repo.api}/raw/dir/file.txt?rev=main`, {
      'if-none-match': raw.headers.get('etag')!,
    });
    expect(r2.status).toBe(304);
  });

  test('a revision or path that names nothing is still a 404, without an ETag', async () => {
    const missing = [
      await s.anon.get(`${repo.api}/tree?rev=no-such-branch`, { 'if-none-match': '*' }),
      // the revision resolves (its tag was set) but the path names nothing there
      await s.anon.get(`${repo.api}/tree/no-such-dir?rev=main`),
      await s.anon.get(`${repo.api}/raw/no-such-file?rev=main`, { 'if-none-match': '*' }),
    ];
    for (const r of missing) {
      expectError(r, 404, 'not_found');
      expect(r.headers.get('etag')).toBeNull();
      expect(r.headers.get('cache-control')).toBe('no-store');
    }
  });
});

describe('ranges of an asset download', () => {
  test('a range starting past the end is 416 with Content-Range bytes */size; one inside is 206', async () => {
    const rel = await owner.client.post(`${repo.api}/releases`, {
      tag_name: uniq('v'),
      target_commitish: 'main',
    });
    const up = await postMultipart(`${s.url}${repo.api}/releases/${rel.body.data.id}/assets`, owner.token, [
      { field: 'attachment', filename: 'ten.bin', data: Buffer.from('0123456789') },
    ]);
    expect(up.status).toBe(201);
    const url = `${repo.api}/releases/${rel.body.data.id}/assets/${up.body.data.id}/download`;
    for (const range of ['bytes=10-', 'bytes=20-30', 'bytes=-0']) {
      const r = await s.anon.get(url, { range });
      expectError(r, 416, 'range_not_satisfiable');
      expect(r.headers.get('content-range')).toBe('bytes */10');
    }
    const part = await s.anon.get(url, { range: 'bytes=2-4' });
    expect({ status: part.status, text: part.text }).toEqual({ status: 206, text: '234' });
    // a range the server may ignore (another unit, several ranges) answers the whole
    expect((await s.anon.get(url, { range: 'items=0-1' })).status).toBe(200);
    expect((await s.anon.get(url, { range: 'bytes=0-1,4-5' })).status).toBe(200);
  });
});

describe('CORS (TRIAD_CORS_ORIGINS)', () => {
  const EXPOSED = ['Link', 'X-Total-Count', 'Location', 'Retry-After', 'X-Request-Id', 'X-Svc-Api-Variant'];

  let cors: TestServer;
  let path: string;
  beforeAll(async () => {
    cors = await startTestServer({ TRIAD_CORS_ORIGINS: `${ALLOWED}, http://localhost:8080` });
    const name = uniq('org');
    expect((await cors.admin.post('/api/v1/orgs', { name })).status).toBe(201);
    path = `/api/v1/orgs/${name}`;
  });
  afterAll(async () => {
    await cors.close();
  });

  test('an allowed origin gets its origin back and the exposed headers, never credentials', async () => {
    const r = await cors.anon.get(path, { origin: ALLOWED });
    expect(r.status).toBe(200);
    expect(r.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(r.headers.get('vary')).toMatch(/origin/i);
    const exposed = (r.headers.get('access-control-expose-headers') ?? '').split(',').map((h) => h.trim());
    expect(exposed).toEqual(expect.arrayContaining(EXPOSED));
    expect(r.headers.get('access-control-allow-credentials')).toBeNull();
    const local = await cors.anon.get(path, { origin: 'http://localhost:8080' });
    expect(local.headers.get('access-control-allow-origin')).toBe('http://localhost:8080');
  });

  test('another origin gets no CORS header; without the setting nobody does', async () => {
    for (const origin of ['https://evil.example.test', 'https://app.example.test.evil.test', 'null']) {
      const r = await cors.anon.get(path, { origin });
      expect(r.status).toBe(200);
      expect(r.headers.get('access-control-allow-origin')).toBeNull();
    }
    const off = await s.anon.get(`/api/v1/orgs/${org}`, { origin: ALLOWED });
    expect(off.headers.get('access-control-allow-origin')).toBeNull();
  });

  test('a preflight of an allowed origin is answered 204 with the methods and headers; another origin gets none', async () => {
    const ask = (origin: string) =>
      cors.anon.request('OPTIONS', '/api/v1/orgs', undefined, {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      });
    const r = await ask(ALLOWED);
    expect(r.status).toBe(204);
    expect(r.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(r.headers.get('access-control-allow-methods')).toContain('POST');
    expect((r.headers.get('access-control-allow-headers') ?? '').toLowerCase()).toContain('authorization');
    expect(r.headers.get('access-control-allow-credentials')).toBeNull();
    expect(r.headers.get('allow')).toContain('POST');
    // without Access-Control-Allow-Origin the browser refuses the preflight (and so the request)
    const other = await ask('https://evil.example.test');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('text fields with a maximum length', () => {
  test('the length is checked as sent, before trimming, as the document declares it', async () => {
    const padded = (n: number) => `${'t'.repeat(n)} `;
    const cases: [string, string, Record<string, unknown>][] = [
      ['an issue title', `${repo.api}/issues`, { title: padded(1000) }],
      ['a pull request title', `${repo.api}/pulls`, { title: padded(1000), source_ref: 'main' }],
      ['a release target', `${repo.api}/releases`, { tag_name: uniq('v'), target_commitish: padded(255) }],
    ];
    for (const [what, path, body] of cases) {
      const r = await owner.client.post(path, body);
      expect({ what, status: r.status, code: r.body?.error?.code }).toEqual({
        what,
        status: 400,
        code: 'validation_failed',
      });
    }
    const trimmed = await owner.client.post(`${repo.api}/issues`, { title: ` ${'t'.repeat(998)} ` });
    expect(trimmed.status).toBe(201);
    expect(trimmed.body.data.title).toBe('t'.repeat(998));
  });
});

describe('agent names', () => {
  test('the length is checked as sent, before trimming; the name kept is trimmed', async () => {
    const long = `${'a'.repeat(255)} `;
    expectError(await s.admin.post('/api/v1/admin/agents', { name: long }), 400, 'validation_failed');
    const r = await s.admin.post('/api/v1/admin/agents', { name: ` ${'b'.repeat(253)} ` });
    expect(r.status).toBe(201);
    expect(r.body.data.name).toBe('b'.repeat(253));
  });
});
