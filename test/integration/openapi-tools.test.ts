/**
 * The served OpenAPI document as third-party tools take it: `@redocly/cli lint`, openapi-core (a
 * strict validator, PyPI; .ci/run installs it) on the document and on real exchanges (an open
 * pull request's `merged_by: null`, a release's `author`, an asset's `uploader`, the ambiguous
 * release paths), and a client generated with openapi-typescript + openapi-fetch
 * (test/client/triad-client.ts, type-checked without casts by `npm run typecheck`) that uploads a
 * release asset and downloads an archive.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { ROOT, NODE } from '../helpers/process.ts';
import { PrRepo } from '../helpers/pulls.ts';
import { tempDir } from '../helpers/vcs.ts';
import { clientTypes } from '../client/generate.ts';
import { downloadArchive, downloadAsset, releaseWithAsset, triadClient } from '../client/triad-client.ts';

const run = promisify(execFile);
let s: TestServer;
let owner: TestUser;
let org: string;
let repo: PrRepo;
let doc: any;
let dir: string;

withOrgServer({}, (w) => ({ s, owner, org } = w));
beforeAll(async () => {
  repo = await PrRepo.create(owner, org, 'git');
  doc = (await s.anon.get('/api/v1/openapi.json')).body;
  dir = await tempDir('triad-openapi-');
  await fs.writeFile(path.join(dir, 'openapi.json'), JSON.stringify(doc, null, 2));
});

/** One exchange as openapi_core_check.py takes it. */
type Exchange = {
  method: string;
  url: string;
  operation: string;
  status: number;
  content_type: string;
  headers: Record<string, string>;
  body: string;
  check_request?: boolean;
  request?: { headers: Record<string, string>; content_type?: string; body?: string };
};

async function exchange(operation: string, method: string, p: string, body?: unknown): Promise<Exchange> {
  const r = await owner.client.request(method, p, body);
  return {
    method,
    url: `${s.url}${p}`,
    operation,
    status: r.status,
    content_type: (r.headers.get('content-type') ?? '').split(';')[0]!,
    headers: Object.fromEntries(r.headers),
    body: r.text,
    check_request: true,
    request: {
      headers: { Authorization: `Bearer ${owner.token}`, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    },
  };
}

describe('third-party tools accept the document', () => {
  test('@redocly/cli lint: no errors, and the one warning is the ambiguity the spec fixes', async () => {
    const cli = path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');
    const args = [cli, 'lint', path.join(dir, 'openapi.json'), '--config', path.join(ROOT, 'redocly.yaml')];
    const env = {
      ...process.env,
      REDOCLY_TELEMETRY: 'off',
      REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
      REDOCLY_SUPPRESS_NOTIFICATIONS: 'true',
    };
    const out = await run(NODE, [...args, '--format=json'], { env, maxBuffer: 16 << 20 });
    const report = JSON.parse(out.stdout) as {
      totals: { errors: number };
      problems: { ruleId: string; message: string }[];
    };
    expect(report.totals.errors).toBe(0);
    // `/releases/tags/{tag}` and `/releases/{id}/assets` are both the spec's. `{id}` is an
    // integer, so `tags` is never one: `/releases/tags/assets` is the release of tag `assets`,
    // as the server routes it and as openapi-core resolves it (checked below).
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([
      'no-ambiguous-paths: Paths should resolve unambiguously. Found two ambiguous paths: ' +
        '`/api/v1/repos/{org}/{repo}/releases/tags/{tag}` and `/api/v1/repos/{org}/{repo}/releases/{id}/assets`.',
    ]);
  });

  test('openapi-core loads the document and finds real answers fit it: nullable references, release paths', async () => {
    const api = repo.api;
    await repo.commitOn('feature', { 'f.txt': 'x\n' }, 'feature work');
    const pull = await owner.client.post(`${api}/pulls`, {
      title: 'open one',
      source_ref: 'feature',
      target_ref: 'main',
    });
    expect(pull.status).toBe(201);
    expect(pull.body.data.merged_by).toBeNull();
    const tag = uniq('v');
    const c = triadClient(s.url, owner.token);
    const { release } = await releaseWithAsset(
      c,
      { org, repo: repo.name, tag, target: 'main' },
      { name: 'notes.txt', bytes: new TextEncoder().encode('notes\n') },
    );
    const exchanges = [
      await exchange('getPull', 'GET', `${api}/pulls/${pull.body.data.number}`),
      await exchange('listPulls', 'GET', `${api}/pulls`),
      await exchange('getRelease', 'GET', `${api}/releases/${release.id}`),
      await exchange('getReleaseByTag', 'GET', `${api}/releases/tags/${tag}`),
      await exchange('listReleaseAssets', 'GET', `${api}/releases/${release.id}/assets`),
      // a tag named `assets`: the tag's path, not the assets of a release `tags`
      await exchange('getReleaseByTag', 'GET', `${api}/releases/tags/assets`),
      await exchange('createIssue', 'POST', `${api}/issues`, { title: 'hello' }),
    ];
    expect(exchanges.map((x) => x.status)).toEqual([200, 200, 200, 200, 200, 404, 201]);
    await fs.writeFile(path.join(dir, 'exchanges.json'), JSON.stringify(exchanges));
    const script = path.join(ROOT, 'test/helpers/openapi_core_check.py');
    const args = [script, path.join(dir, 'openapi.json'), path.join(dir, 'exchanges.json')];
    const out = await run('python3', args, { maxBuffer: 16 << 20 }).catch(
      (e: Error & { stderr?: string }) => {
        const why = e.stderr ?? e.message;
        throw new Error(
          `openapi-core check failed (pip install openapi-core==0.23.1, as .ci/run does): ${why}`,
        );
      },
    );
    expect(JSON.parse(out.stdout)).toEqual({ problems: [] });
  });
});

describe('a client generated from the document', () => {
  test('its committed types are those of the served document', async () => {
    const file = path.join(ROOT, 'test/client/triad-api.ts');
    const fresh = await clientTypes(doc);
    if (process.env.UPDATE_CLIENT_TYPES === '1') await fs.writeFile(file, fresh);
    // on a difference: UPDATE_CLIENT_TYPES=1 rewrites the file (see its first lines)
    expect(await fs.readFile(file, 'utf8')).toBe(fresh);
  });

  test('uploads a release asset and downloads it and an archive, revalidating the archive by ETag', async () => {
    const c = triadClient(s.url, owner.token);
    const where = { org, repo: repo.name };
    const bytes = new Uint8Array([0, 1, 2, 250, 255, 10, 13]);
    const { release, asset } = await releaseWithAsset(
      c,
      { ...where, tag: uniq('v'), target: 'main' },
      { name: 'tool.bin', bytes, label: 'the tool' },
    );
    expect(asset).toMatchObject({ name: 'tool.bin', label: 'the tool', size: bytes.length });
    expect(await downloadAsset(c, { ...where, id: release.id, asset_id: asset.id })).toEqual(bytes);

    const archive = await downloadArchive(c, { ...where, rev: 'main' });
    if (archive.notModified) throw new Error('a first download answered 304');
    expect(gunzipSync(archive.bytes).includes(Buffer.from('hello\n'))).toBe(true);
    expect(archive.etag).toMatch(/^"[^"]+"$/);
    const again = await downloadArchive(c, { ...where, rev: 'main' }, archive.etag);
    expect(again).toEqual({ notModified: true, etag: archive.etag });
  });
});
