import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { ok, tempDir, writeFile } from '../helpers/vcs.ts';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, serverWithOrg } from '../helpers/factories.ts';
import { addCommit, LOGO, MAIN_C1, populate, type Fixture } from './contents-fixture.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { spawnedCount } from '../../src/vcs/process/spawner.ts';

/** A 60 MB file of random bytes (nothing compresses it). */
const BIG = randomBytes(60 * 1024 * 1024);
const BIG_SHA = createHash('sha256').update(BIG).digest('hex');

let s: TestServer;
let owner: TestUser;
let org: string;
beforeAll(async () => {
  // every download read from the store (the raw cache off; contents-raw-cache.test.ts tests it)
  ({ s, owner, org } = await serverWithOrg({ TRIAD_RAW_CACHE_BYTES: '0' }));
});
afterAll(async () => {
  await s.close();
});

async function repoOf(vcs: VcsKind): Promise<{ base: string; store: string }> {
  const repo = await newRepo(owner, org, { vcs });
  return { base: repo.api, store: s.running.services.repos.path(repo) };
}

const get = (p: string) => fetch(`${s.url}${p}`, { signal: AbortSignal.timeout(120_000) });

describe.each(['git', 'hg', 'fossil'] as const)('%s: raw file downloads', (vcs) => {
  let base: string;
  let fx: Fixture;
  let big: string;
  let store: string;
  beforeAll(async () => {
    const repo = await repoOf(vcs);
    base = repo.base;
    store = repo.store;
    fx = await populate(vcs, repo.store);
    big = await addCommit(vcs, repo.store, { 'big/blob.bin': BIG });
  }, 180_000);

  test('when a text file is asked for, then its bytes come as text/plain with their length, at tip or at a revision', async () => {
    const r = await get(`${base}/raw/README.md`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(r.headers.get('content-length')).toBe('12');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await r.text()).toBe('hello\nworld\n');
    const old = await get(`${base}/raw/src/main.c?rev=${fx.c1}`);
    expect(old.status).toBe(200);
    expect(await old.text()).toBe(MAIN_C1);
  });

  test('when a binary file is asked for, then its exact bytes come as application/octet-stream', async () => {
    const r = await get(`${base}/raw/logo.png`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    expect(r.headers.get('content-length')).toBe(String(LOGO.length));
    expect(Buffer.from(await r.arrayBuffer())).toEqual(LOGO);
  });

  test('when a 60 MB file is downloaded, then every byte arrives, and other reads of the repository answer meanwhile', async () => {
    const r = await get(`${base}/raw/big/blob.bin?rev=${big}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/octet-stream');
    expect(r.headers.get('content-length')).toBe(String(BIG.length));
    const reader = r.body!.getReader();
    const hash = createHash('sha256');
    let size = 0;
    const first = await reader.read();
    hash.update(first.value);
    size += first.value!.length;
    // the download is under way: the repository's other reads are not behind it
    const tree = await get(`${base}/tree?rev=${big}`);
    expect(tree.status).toBe(200);
    expect(((await tree.json()) as { data: { name: string }[] }).data.map((e) => e.name)).toContain('big');
    for (let c = await reader.read(); !c.done; c = await reader.read()) {
      hash.update(c.value);
      size += c.value.length;
    }
    expect(size).toBe(BIG.length);
    expect(hash.digest('hex')).toBe(BIG_SHA);
  }, 120_000);

  test('when the path, the revision or the file does not exist, or names a directory, then 404; a path escaping the repository is 400', async () => {
    for (const p of [`${base}/raw/nope.txt`, `${base}/raw/src`, `${base}/raw/README.md?rev=no-such-rev`]) {
      const r = await get(p);
      expect({ p, status: r.status }).toEqual({ p, status: 404 });
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('not_found');
    }
    const up = await get(`${base}/raw/src/..%2F..%2Fetc/passwd`);
    expect(up.status).toBe(400);
    expect(((await up.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
  });

  test('when a file name starts with a dash (`-x.txt`, `--args`), then its bytes come as for any other name', async () => {
    const id = await addCommit(vcs, store, { '-x.txt': 'dash\n', '--args': 'not an option\n' });
    for (const [p, body] of [
      ['-x.txt', 'dash\n'],
      ['--args', 'not an option\n'],
      [`-x.txt?rev=${id}`, 'dash\n'],
    ] as const) {
      const r = await get(`${base}/raw/${p}`);
      expect({ p, status: r.status }).toEqual({ p, status: 200 });
      expect(await r.text()).toBe(body);
    }
  }, 120_000);

  test('when an empty file is asked for, then it is an empty text/plain body of length 0', async () => {
    const id = await addCommit(vcs, store, { 'empty.txt': '' });
    const r = await get(`${base}/raw/empty.txt?rev=${id}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(r.headers.get('content-length')).toBe('0');
    expect(await r.text()).toBe('');
  }, 120_000);

  test('when files just at and just above the size the reader answers whole (256 KiB) are asked for, then both are byte for byte, and only the larger needs a process', async () => {
    const at = randomBytes(256 * 1024);
    const above = randomBytes(256 * 1024 + 1);
    const text = Buffer.from('a line of text\n'.repeat(20_000)); // 300,000 bytes of text
    const id = await addCommit(vcs, store, {
      'edge/at.bin': at,
      'edge/above.bin': above,
      'edge/text.txt': text,
    });
    for (const [file, bytes, type, processes] of [
      ['at.bin', at, 'application/octet-stream', 0],
      ['above.bin', above, 'application/octet-stream', 1],
      ['text.txt', text, 'text/plain; charset=utf-8', 1],
    ] as const) {
      await get(`${base}/tree?rev=${id}`); // the reader knows the revision already
      const before = spawnedCount();
      const r = await get(`${base}/raw/edge/${file}?rev=${id}`);
      expect([file, r.status, r.headers.get('content-type'), r.headers.get('content-length')]).toEqual([
        file,
        200,
        type,
        String(bytes.length),
      ]);
      expect(Buffer.from(await r.arrayBuffer()).equals(bytes)).toBe(true);
      // (a git download through a plain fetch is relayed: the head's process is the only one)
      expect([
        file,
        spawnedCount() - before >= processes,
        processes === 0 ? spawnedCount() - before : 0,
      ]).toEqual([file, true, 0]);
    }
  }, 120_000);

  test('when a file is asked for at an older revision, then its length and bytes are those of that revision', async () => {
    // README.md is 'hello\n' at c1 and 'hello\nworld\n' from c2 on (Fossil keeps the older one
    // as a delta against the newer)
    for (const [rev, body] of [
      [fx.c1, 'hello\n'],
      [fx.c2, 'hello\nworld\n'],
      [big, 'hello\nworld\n'],
    ] as const) {
      const r = await get(`${base}/raw/README.md?rev=${rev}`);
      expect({ rev, status: r.status, length: r.headers.get('content-length') }).toEqual({
        rev,
        status: 200,
        length: String(Buffer.byteLength(body)),
      });
      expect(await r.text()).toBe(body);
    }
    const before = await get(`${base}/raw/big/blob.bin?rev=${fx.c3}`);
    expect(before.status).toBe(404);
  });

  test('when the client goes away in the middle of a 60 MB download, then no process is left reading the file', async () => {
    const url = new URL(`${s.url}${base}/raw/big/blob.bin`);
    const req = await new Promise<http.ClientRequest>((resolve, reject) => {
      const q = http.get(url, (res) => {
        expect(res.statusCode).toBe(200);
        res.once('data', () => {
          res.pause();
          resolve(q);
        });
      });
      q.on('error', reject);
    });
    // the download is under way: its process is there, held by the unread body
    expect(await catProcesses(store)).toHaveLength(1);
    req.on('error', () => undefined);
    req.destroy();
    // the reading process (not the repository's pooled reader) ends; generous wait on a loaded machine
    let left = await catProcesses(store);
    for (let i = 0; i < 200 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = await catProcesses(store);
    }
    expect(left).toEqual([]);
    // and the file still downloads whole
    const r = await get(`${base}/raw/big/blob.bin`);
    expect(Buffer.from(await r.arrayBuffer()).length).toBe(BIG.length);
  }, 120_000);

  test('when the repository was just created, then 404 as the blob read answers ("repository is empty"; Fossil: its initial check-in has no files)', async () => {
    const empty = await repoOf(vcs);
    const r = await get(`${empty.base}/raw/README.md`);
    expect(r.status).toBe(404);
    const body = (await r.json()) as { error: { code: string; message: string } };
    expect(body.error).toEqual({
      code: 'not_found',
      message: vcs === 'fossil' ? 'path not found' : 'repository is empty',
    });
    const blob = await get(`${empty.base}/blob/README.md`);
    expect(await blob.json()).toEqual(body);
  });
});

/** Command lines of the processes reading a file of `store` for a raw download (not the pooled readers). */
async function catProcesses(store: string): Promise<string[]> {
  const out: string[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmd = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const args = cmd.split('\0');
    if (!args.includes(store) && !args.some((a) => a.startsWith(store))) continue;
    const line = args.join(' ');
    if (/cat-file blob|triadcat\.py| cat -R /.test(line)) out.push(line);
  }
  return out;
}

describe('hg: raw files whose stored revision is not the bytes', () => {
  let base: string;
  let store: string;
  let head: string;
  beforeAll(async () => {
    const repo = await repoOf('hg');
    base = repo.base;
    store = repo.store;
    const work = await tempDir('triad-raw-hg-');
    const hg = (args: string[]) => ok('/usr/bin/hg', args, work);
    try {
      await hg(['init', '.']);
      await writeFile(work, 'orig.bin', Buffer.concat([Buffer.from([0, 1, 2]), randomBytes(5000)]));
      // data that starts with the bytes of Mercurial's metadata marker: stored behind an empty
      // metadata block, so the stored revision is 4 bytes longer than the file
      await writeFile(work, 'meta.txt', '\u0001\nnot metadata\n');
      // the same, larger than what the reader answers whole (its bytes come from triadcat.py)
      await writeFile(work, 'big-orig.bin', randomBytes(300 * 1024));
      await writeFile(work, 'big-meta.txt', `\u0001\n${'big, not metadata\n'.repeat(20_000)}`);
      await hg(['add', '-q']);
      await hg(['commit', '-m', 'first']);
      // the first revision of copied.bin and moved.txt carries copy metadata
      await hg(['copy', 'orig.bin', 'copied.bin']);
      await hg(['rename', 'meta.txt', 'moved.txt']);
      await writeFile(work, 'moved.txt', '\u0001\nmoved and changed\n');
      await hg(['copy', 'big-orig.bin', 'big-copied.bin']);
      await hg(['rename', 'big-meta.txt', 'big-moved.txt']);
      await writeFile(work, 'big-moved.txt', `\u0001\n${'big, moved and changed\n'.repeat(20_000)}`);
      await hg(['commit', '-m', 'copy and rename']);
      await hg(['push', '-q', store]);
      head = (await hg(['log', '-r', 'tip', '-T', '{node}'])).trim();
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
  }, 120_000);

  test.each([
    ['copied.bin', 'application/octet-stream'],
    ['moved.txt', 'text/plain; charset=utf-8'],
    ['orig.bin', 'application/octet-stream'],
    ['big-copied.bin', 'application/octet-stream'],
    ['big-moved.txt', 'text/plain; charset=utf-8'],
    ['big-orig.bin', 'application/octet-stream'],
  ])(
    'when %s is asked for, then its length and bytes are exactly what `hg cat` prints',
    async (file, type) => {
      const cat = await new Promise<Buffer>((resolve, reject) => {
        execFile(
          '/usr/bin/hg',
          ['-R', store, 'cat', '-r', head, `path:${file}`],
          { encoding: 'buffer', env: { ...process.env, HGPLAIN: '1', HGRCPATH: '' } },
          (err, stdout) => (err !== null ? reject(new Error(err.message)) : resolve(stdout)),
        );
      });
      const r = await get(`${base}/raw/${file}`);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe(type);
      expect(r.headers.get('content-length')).toBe(String(cat.length));
      expect(Buffer.from(await r.arrayBuffer())).toEqual(cat);
    },
  );

  test('when a file starting with the bytes \\1\\n is asked for at its first revision, then those are its bytes', async () => {
    const r = await get(`${base}/raw/meta.txt?rev=0`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-length')).toBe(String(Buffer.byteLength('\u0001\nnot metadata\n')));
    expect(await r.text()).toBe('\u0001\nnot metadata\n');
    const big = `\u0001\n${'big, not metadata\n'.repeat(20_000)}`;
    const large = await get(`${base}/raw/big-meta.txt?rev=0`);
    expect(large.headers.get('content-length')).toBe(String(Buffer.byteLength(big)));
    expect(await large.text()).toBe(big);
  });
});
