import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { hostedDir, newRepo, withOrgServer } from '../helpers/factories.ts';
import { tempDir } from '../helpers/vcs.ts';
import { WorkingCopy } from '../helpers/clients.ts';
import { basic, rawRequest } from '../helpers/transport.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

const exec = promisify(execFile);

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

async function repoOf(kind: VcsKind) {
  const repo = await newRepo(owner, org, { vcs: kind });
  return { ...repo, dir: hostedDir(s.dataDir, repo) };
}

const PAGE = '<html><body><script>alert(document.cookie)</script></body></html>\n';

async function get(p: string, headers: Record<string, string> = {}) {
  const r = await fetch(`${s.url}${p}`, { headers });
  return {
    status: r.status,
    type: r.headers.get('content-type') ?? '',
    text: await r.text(),
    headers: r.headers,
  };
}

describe('a clone URL serves the wire protocols only', () => {
  test.each([
    [
      'hg',
      [
        '/raw-file/tip/x.html',
        '/file/tip/x.html',
        '?cmd=file&file=x.html&node=tip',
        '/archive/tip.zip',
        '/static/x',
      ],
    ],
    ['fossil', ['/raw/x.html?ci=tip', '/doc/tip/x.html', '/timeline', '/json/dir', '/xfer']],
    ['git', ['/HEAD', '/info/refs', '/objects/info/packs', '/config']],
  ] as [VcsKind, string[]][])(
    'when a pushed HTML file is asked for through the %s web UI, then it is not served, while clone and push work',
    async (kind, paths) => {
      const repo = await repoOf(kind);
      const w = await WorkingCopy.clone(kind, repo.clone, owner.token);
      await w.commit('x.html', PAGE, 'a page');
      expect((await w.push()).code).toBe(0);
      for (const p of paths) {
        const r = await get(`/${org}/${repo.name}${p}`, { authorization: basic(owner.token) });
        expect({ p, status: r.status }).toEqual({ p, status: 404 });
        expect(r.type).toMatch(/^text\/plain/);
        expect(r.text).not.toContain('<script>');
        expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      }
      // a browser visiting the clone URL gets a plain-text hint
      const hint = await get(`/${org}/${repo.name}`);
      expect(hint.status).toBe(200);
      expect(hint.type).toMatch(/^text\/plain/);
      expect(hint.text).toContain(`clone ${repo.clone}`);
      // cloning still works and brings the file
      const other = await WorkingCopy.clone(kind, repo.clone, owner.token);
      expect(await fs.readFile(path.join(other.dir, 'x.html'), 'utf8')).toBe(PAGE);
    },
    60_000,
  );
});

describe('Mercurial remote-changegroup', () => {
  test('when a pusher sends a bundle with a remote-changegroup part, then the server fetches nothing and refuses it; the capability is not advertised', async () => {
    const repo = await repoOf('hg');
    const caps = await get(`/${org}/${repo.name}?cmd=capabilities`);
    expect(caps.status).toBe(200);
    expect(decodeURIComponent(caps.text)).toContain('bundle2=');
    expect(decodeURIComponent(caps.text)).not.toContain('remote-changegroup');

    const hits: string[] = [];
    const target = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      res.end('HG10UN');
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    try {
      const port = (target.address() as AddressInfo).port;
      const dir = await tempDir();
      const bundle = path.join(dir, 'evil.hg');
      // a bundle2 stream with one mandatory remote-changegroup part, written with Mercurial's own API
      const script = [
        'import sys',
        "sys.path.insert(0, '/usr/lib/python3/dist-packages')",
        'from mercurial import bundle2, ui as uimod',
        'b = bundle2.bundle20(uimod.ui.load())',
        `b.newpart(b'remote-changegroup', mandatoryparams=[(b'url', b'http://127.0.0.1:${port}/probe'), (b'size', b'6')])`,
        `open(${JSON.stringify(bundle)}, 'wb').write(b''.join(b.getchunks()))`,
      ].join('\n');
      await exec('/usr/bin/python3', ['-c', script]);
      const body = await fs.readFile(bundle);
      const r = await rawRequest(s.url, {
        method: 'POST',
        path: `/${org}/${repo.name}?cmd=unbundle`,
        headers: {
          authorization: basic(owner.token),
          'content-type': 'application/mercurial-0.1',
          'content-length': String(body.length),
          'x-hgarg-1': 'heads=666f726365',
        },
        body,
      });
      expect(r?.status).toBeDefined();
      expect(hits).toEqual([]);
      expect(r!.body.toString('latin1')).toContain('remote-changegroup');
    } finally {
      await new Promise<void>((resolve) => target.close(() => resolve()));
    }
  }, 60_000);
});

describe('hostile or broken requests at a clone URL', () => {
  test('when a subpath holds NUL or dot-dot segments, then the answer is 400 or 404, never 500', async () => {
    const repo = await repoOf('git');
    const auth = { authorization: basic(owner.token) };
    for (const p of [
      '/info%00/refs',
      '/%00',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/..%2f..%2fconfig',
      '/info/refs%00?service=git-upload-pack',
    ]) {
      const r = await get(`/${org}/${repo.name}${p}`, auth);
      expect({ p, status: [400, 404].includes(r.status) }).toEqual({ p, status: true });
    }
    for (const p of [
      `/${org}%00/${repo.name}`,
      `/${org}/${repo.name}%00`,
      `/${org}/${repo.name}%00/info/refs`,
    ]) {
      const r = await get(p, auth);
      expect({ p, status: [400, 404].includes(r.status) }).toEqual({ p, status: true });
    }
  });

  test('when cmd or service is repeated, then the request is refused with 400', async () => {
    const hg = await repoOf('hg');
    const git = await repoOf('git');
    const auth = { authorization: basic(owner.token) };
    const a = await get(`/${org}/${hg.name}?cmd=capabilities&cmd=unbundle`, auth);
    expect(a.status).toBe(400);
    const b = await get(
      `/${org}/${git.name}/info/refs?service=git-upload-pack&service=git-receive-pack`,
      auth,
    );
    expect(b.status).toBe(400);
  });

  test('when a backend fails, then the client gets a generic 502 with the request id, not its error output', async () => {
    const repo = await repoOf('hg');
    const requires = path.join(repo.dir, '.hg', 'requires');
    const saved = await fs.readFile(requires, 'utf8');
    await fs.writeFile(requires, `${saved}triad-test-unknown-requirement\n`);
    try {
      const r = await get(`/${org}/${repo.name}?cmd=capabilities`, { 'x-request-id': 'req-502-check' });
      expect(r.status).toBe(502);
      expect(r.text).toBe('repository backend failed (request id req-502-check)\n');
    } finally {
      await fs.writeFile(requires, saved);
    }
    expect((await get(`/${org}/${repo.name}?cmd=capabilities`)).status).toBe(200);
  });
});
