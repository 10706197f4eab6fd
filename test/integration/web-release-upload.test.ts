/**
 * The web's release asset upload (`POST /:org/:repo/-/releases/:id/assets`) over HTTP, as a
 * browser sends it, with the filesystem blob store: the form token is checked before the file is
 * stored (a missing, wrong or late token, another site: 403), a file over the cap is refused
 * from its declared length and while it streams (413), the island's requests get fragments, and a
 * client that goes away mid-file leaves no asset, no object and no temporary file.
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { postMultipart, type Part, type Sent } from '../helpers/multipart.ts';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo } from '../helpers/factories.ts';
import { ok, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

const MAX = 1024 * 1024;
let s: TestServer;
let owner: TestUser;
let cookie: string;
let token: string;
let api: string;
let url: string;
let releaseId: number;

beforeAll(async () => {
  s = await startTestServer({ TRIAD_ASSET_MAX_BYTES: String(MAX) });
  const username = uniq('up');
  owner = await s.newUser(username);
  await s.admin.patch(`/api/v1/admin/users/${username}`, { password: 'upload-password' });
  const org = await s.newOrg(owner);
  const repo = await newRepo(owner, org, { vcs: 'git' });
  const work = await tempDir('triad-web-upload-');
  await ok('git', ['init', '-q', '-b', 'main', '.'], work);
  await writeFile(work, 'README.md', '# up\n');
  await ok('git', ['add', '.'], work);
  await ok('git', ['commit', '-q', '-m', 'first'], work);
  await ok('git', ['tag', 'v1.0'], work);
  await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main', '--tags'], work);
  api = `/api/v1/repos/${org}/${repo.name}/releases`;
  releaseId = (await owner.client.post(api, { tag_name: 'v1.0' })).body.data.id;
  url = `${s.url}/${org}/${repo.name}/-/releases/${releaseId}`;

  const login = await fetch(`${s.url}/-/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams({ login: username, password: 'upload-password' }).toString(),
  });
  cookie = /^(triad_session=[\w-]+);/.exec(login.headers.get('set-cookie') ?? '')![1]!;
  const page = await (await fetch(url, { headers: { cookie } })).text();
  token = /name="_csrf" value="([^"]+)"/.exec(page)![1]!;
}, 60_000);
afterAll(async () => {
  await s?.close();
});

const SAME_SITE = { 'sec-fetch-site': 'same-origin' };

function file(name: string, data: Buffer): Part {
  return { field: 'attachment', filename: name, data };
}

/** An upload from the page: the form token first, then the file (`query`: `?fragment=1`). */
function upload(
  parts: Part[],
  opts: { query?: string; headers?: Record<string, string>; chunked?: boolean } = {},
) {
  return postMultipart(`${url}/assets${opts.query ?? ''}`, undefined, parts, {
    headers: { cookie, ...SAME_SITE, ...opts.headers },
    chunked: opts.chunked,
  });
}

/** The release's asset names (API), the stored objects and the temporary files of the store. */
/**
 * What is stored once a refused upload has unwound: its temporary file may go just after the
 * answer (as in releases-api.test.ts), so this waits a while for `expected` before answering.
 */
async function storedAgain(expected: Awaited<ReturnType<typeof stored>>) {
  let now = await stored();
  for (let i = 0; i < 100 && JSON.stringify(now) !== JSON.stringify(expected); i++) {
    await new Promise((r) => setTimeout(r, 50));
    now = await stored();
  }
  return now;
}

async function stored(): Promise<{ assets: string[]; objects: number; incoming: number }> {
  const blobs = path.join(s.dataDir, 'blobs');
  const objects = await fs
    .readdir(path.join(blobs, 'releases'), { recursive: true, withFileTypes: true })
    .catch(() => []);
  const incoming = await fs.readdir(path.join(blobs, '.incoming')).catch(() => []);
  const assets = (await owner.client.get(`${api}/${releaseId}/assets`)).body.data.map(
    (a: { name: string }) => a.name,
  );
  return { assets, objects: objects.filter((e) => e.isFile()).length, incoming: incoming.length };
}

function expectPage(r: Sent, status: number, text: string): void {
  expect({
    status: r.status,
    type: r.headers['content-type'],
    fragment: r.headers['x-triad-fragment'],
  }).toEqual({
    status,
    type: 'text/html; charset=utf-8',
    fragment: undefined,
  });
  expect(r.text).toContain(text);
}

describe('the web upload of release assets', () => {
  test('when a file is sent with the form token, then it is stored: a redirect for the form, the new table for the island', async () => {
    const form = await upload([
      { field: '_csrf', value: token },
      file('a.txt', Buffer.from('a\n')),
      { field: 'name', value: '' },
    ]);
    expect({ status: form.status, to: form.headers.location }).toEqual({
      status: 303,
      to: `${new URL(url).pathname}?uploaded=1#assets`,
    });
    const island = await upload([{ field: '_csrf', value: token }, file('b.txt', Buffer.from('b\n'))], {
      query: '?fragment=1',
    });
    expect({ status: island.status, fragment: island.headers['x-triad-fragment'] }).toEqual({
      status: 201,
      fragment: '1',
    });
    expect(island.text).toMatch(/^<div id="assets-list"/);
    expect(island.text).toContain('>a.txt</a>');
    expect(island.text).toContain('>b.txt</a>');
    expect(await stored()).toEqual({ assets: ['a.txt', 'b.txt'], objects: 2, incoming: 0 });
  });

  test('when the form token is missing, wrong or sent after the file, or another site sends the form, then 403 and nothing is stored', async () => {
    const before = await stored();
    const data = () => file('c.txt', Buffer.alloc(200_000, 1));
    const cases: [string, () => Promise<Sent>][] = [
      ['no token', () => upload([data()])],
      ['a wrong token', () => upload([{ field: '_csrf', value: `${token}x` }, data()])],
      ['the token after the file', () => upload([data(), { field: '_csrf', value: token }])],
      [
        'another site',
        () =>
          upload([{ field: '_csrf', value: token }, data()], { headers: { 'sec-fetch-site': 'cross-site' } }),
      ],
    ];
    for (const [what, send] of cases) {
      const r = await send();
      expect([what, r.status]).toEqual([what, 403]);
      expect(r.text).toContain('nothing was changed');
    }
    expect(await storedAgain(before)).toEqual(before);
    // the island gets the reason as a fragment
    const r = await upload([data()], { query: '?fragment=1' });
    expect({ status: r.status, fragment: r.headers['x-triad-fragment'] }).toEqual({
      status: 403,
      fragment: '1',
    });
    expect(r.text).toMatch(/^<p>This form is out of date/);
  });

  test('when a file is over the cap, then 413 from its declared length or as it streams, and nothing is stored', async () => {
    const before = await stored();
    const big = () => file('big.bin', Buffer.alloc(MAX + 1, 7));
    expectPage(
      await upload([{ field: '_csrf', value: token }, big()]),
      413,
      `larger than the ${MAX} bytes allowed`,
    );
    expectPage(
      await upload([{ field: '_csrf', value: token }, big()], { chunked: true }),
      413,
      'larger than',
    );
    const r = await upload([{ field: '_csrf', value: token }, big()], {
      query: '?fragment=1',
      chunked: true,
    });
    expect({ status: r.status, fragment: r.headers['x-triad-fragment'] }).toEqual({
      status: 413,
      fragment: '1',
    });
    expect(await storedAgain(before)).toEqual(before);
    // other refusals: not multipart, an unknown release, a duplicate name
    const json = await postMultipart(`${url}/assets`, undefined, [], {
      contentType: 'application/json',
      headers: { cookie, ...SAME_SITE },
    });
    expectPage(json, 415, 'multipart/form-data');
    const unknown = await postMultipart(
      `${url.replace(/\d+$/, '999999')}/assets`,
      undefined,
      [file('x', Buffer.from('x'))],
      {
        headers: { cookie, ...SAME_SITE },
      },
    );
    expectPage(unknown, 404, 'There is nothing here');
    const dup = await upload([{ field: '_csrf', value: token }, file('a.txt', Buffer.from('again'))]);
    expectPage(dup, 409, 'has an asset named a.txt already');
    expect(dup.text).toContain('<form method="post"');
    expect(await storedAgain(before)).toEqual(before);
  });

  test('when the browser goes away in the middle of the file, then no asset, no object and no temporary file remain', async () => {
    const before = await stored();
    const boundary = 'abort-boundary';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\n${token}\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="attachment"; filename="half.bin"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n',
    );
    const req = http.request(`${url}/assets`, {
      method: 'POST',
      headers: {
        cookie,
        ...SAME_SITE,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + 900_000 + 100),
      },
    });
    req.on('error', () => undefined);
    req.write(head);
    req.write(Buffer.alloc(400_000, 9));
    // the half is being written by the server's store: its temporary file exists
    let writing = await stored();
    for (let i = 0; i < 100 && writing.incoming === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      writing = await stored();
    }
    expect(writing.incoming).toBe(1);
    req.destroy();
    expect(await storedAgain(before)).toEqual(before);
  });
});
