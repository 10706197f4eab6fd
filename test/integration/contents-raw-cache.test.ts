import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  BIG,
  BIG_SHA,
  catsOnConnections,
  download,
  repoWithBigFile,
  startAndPause,
  until,
  world,
  type World,
} from './contents-raw-handoff-fixture.ts';
import { addCommit } from './contents-fixture.ts';
import { tempDir } from '../helpers/vcs.ts';
import { spawnedCount } from '../../src/vcs/process/spawner.ts';

// The raw cache (TRIAD_RAW_CACHE_BYTES): a larger file downloaded once is kept as a plain file,
// and later downloads are written from it by `cat`.

/** The files the cache keeps (not one being written), by size. */
async function keptSizes(dir: string): Promise<number[]> {
  const all = await fs.readdir(dir, { recursive: true }).catch(() => [] as string[]);
  const names = all.filter((n) => /^[0-9a-f]{64}\/[0-9a-f]{64}$/.test(n));
  const sizes = await Promise.all(names.map(async (n) => (await fs.stat(path.join(dir, n))).size));
  return sizes.sort((a, b) => a - b);
}

/** The command lines of the `cat` processes writing to this process's connections. */
async function catCommands(): Promise<string[]> {
  const pids = await catsOnConnections();
  return Promise.all(
    pids.map(async (p) => (await fs.readFile(`/proc/${p}/cmdline`, 'utf8')).split('\0').join(' ').trim()),
  );
}

describe.each(['git', 'hg', 'fossil'] as const)('%s: raw downloads kept by the cache', (vcs) => {
  let w: World;
  let base: string;
  let cache: string;
  beforeAll(async () => {
    w = await world({ TRIAD_RAW_CACHE_BYTES: '1g' });
    cache = path.join(w.s.dataDir, 'raw-cache');
    ({ base } = await repoWithBigFile(w, vcs));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when a 60 MB file was downloaded once, then the next download is written from the kept file by cat, byte for byte, and closes its connection', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([first.status, first.size, first.sha]).toEqual([200, BIG.length, BIG_SHA]);
      expect(
        await until(
          () => keptSizes(cache),
          (s) => s.length > 0,
        ),
      ).toEqual([BIG.length]);

      const { req, res } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
      expect([res.statusCode, res.headers['content-length'], res.headers.connection]).toEqual([
        200,
        String(BIG.length),
        'close',
      ]);
      expect(await catCommands()).toEqual([
        expect.stringMatching(new RegExp(`^cat ${cache}/[0-9a-f]{64}/[0-9a-f]{64}$`)),
      ]);
      req.destroy();
      expect(await until(catCommands, (c) => c.length === 0)).toEqual([]);

      const before = spawnedCount();
      const again = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect(again).toEqual({
        status: 200,
        length: String(BIG.length),
        type: 'application/octet-stream',
        size: BIG.length,
        sha: BIG_SHA,
        reused: vcs !== 'fossil', // the first download (from the store) kept its connection: not Fossil's
        connection: 'close',
      });
      expect(spawnedCount() - before).toBe(1); // cat, and nothing reading the repository's store
      const head = await download(agent, `${w.s.url}${base}/raw/big.bin`, 'HEAD');
      expect([head.status, head.length, head.size]).toEqual([200, String(BIG.length), 0]);
      expect(await keptSizes(cache)).toEqual([BIG.length]);
    } finally {
      agent.destroy();
    }
  }, 180_000);
});

describe('git: raw downloads kept by the cache, not handed over', () => {
  let w: World;
  let base: string;
  beforeAll(async () => {
    w = await world({ TRIAD_RAW_CACHE_BYTES: '1g', TRIAD_RAW_SOCKET_HANDOFF: 'false' });
    ({ base } = await repoWithBigFile(w, 'git'));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when the kept file is sent through the server, then it arrives whole on a connection kept alive', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([first.status, first.sha]).toEqual([200, BIG_SHA]);
      await until(
        () => keptSizes(path.join(w.s.dataDir, 'raw-cache')),
        (s) => s.length > 0,
      );
      const before = spawnedCount();
      const again = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([again.status, again.size, again.sha, again.connection, again.reused]).toEqual([
        200,
        BIG.length,
        BIG_SHA,
        'keep-alive',
        true,
      ]);
      expect(spawnedCount() - before).toBe(0);
    } finally {
      agent.destroy();
    }
  }, 180_000);
});

describe('git: the raw cache passed by when it fails, and smaller kept files', () => {
  const MID = randomBytes(1024 * 1024);
  const MID_SHA = createHash('sha256').update(MID).digest('hex');
  let w: World;
  let base: string;
  let cache: string;
  beforeAll(async () => {
    w = await world({ TRIAD_RAW_CACHE_BYTES: '1g' });
    cache = path.join(w.s.dataDir, 'raw-cache');
    let store: string;
    ({ base, store } = await repoWithBigFile(w, 'git'));
    await addCommit('git', store, { 'mid.bin': MID });
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when a kept file of 1 MiB is downloaded, then the server sends it on the kept-alive connection, with no process', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await download(agent, `${w.s.url}${base}/raw/mid.bin`)).sha).toBe(MID_SHA);
      expect(
        await until(
          () => keptSizes(cache),
          (s) => s.length > 0,
        ),
      ).toEqual([MID.length]);
      const before = spawnedCount();
      const again = await download(agent, `${w.s.url}${base}/raw/mid.bin`);
      expect([again.status, again.sha, again.connection, again.reused]).toEqual([
        200,
        MID_SHA,
        'keep-alive',
        true,
      ]);
      expect(spawnedCount() - before).toBe(0);
    } finally {
      agent.destroy();
    }
  }, 120_000);

  test('when a kept file was removed from outside, then the next download reads the store and keeps it again', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(
        await until(
          () => keptSizes(cache),
          (s) => s.length > 0,
        ),
      ).toEqual([MID.length]);
      for (const n of await fs.readdir(cache)) await fs.rm(path.join(cache, n), { recursive: true });
      const r = await download(agent, `${w.s.url}${base}/raw/mid.bin`);
      expect([r.status, r.size, r.sha]).toEqual([200, MID.length, MID_SHA]);
      expect(
        await until(
          () => keptSizes(cache),
          (s) => s.length > 0,
        ),
      ).toEqual([MID.length]);
    } finally {
      agent.destroy();
    }
  }, 120_000);
});

describe('git: the raw cache and a deleted repository', () => {
  let w: World;
  beforeAll(async () => {
    w = await world({ TRIAD_RAW_CACHE_BYTES: '1g' });
  }, 60_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when a repository whose file is kept is deleted, then the kept file goes with it', async () => {
    const cache = path.join(w.s.dataDir, 'raw-cache');
    const { base } = await repoWithBigFile(w, 'git');
    const r = await fetch(`${w.s.url}${base}/raw/big.bin`);
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    expect(
      await until(
        () => keptSizes(cache),
        (s) => s.length > 0,
      ),
    ).toEqual([BIG.length]);
    const del = await w.owner.client.delete(base);
    expect(del.status).toBe(204);
    expect(await keptSizes(cache)).toEqual([]);
    expect(await fs.readdir(cache)).toEqual([]);
  }, 120_000);
});

describe('git: a raw cache directory that cannot be made', () => {
  let w: World;
  let base: string;
  beforeAll(async () => {
    const blocked = path.join(await tempDir(), 'a-file');
    await fs.writeFile(blocked, 'not a directory\n');
    w = await world({ TRIAD_RAW_CACHE_BYTES: '1g', TRIAD_RAW_CACHE_DIR: path.join(blocked, 'cache') });
    ({ base } = await repoWithBigFile(w, 'git'));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when a large file is downloaded twice, then both downloads read the store and arrive whole', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 2; i++) {
        const r = await download(agent, `${w.s.url}${base}/raw/big.bin`);
        expect([r.status, r.size, r.sha, r.connection]).toEqual([200, BIG.length, BIG_SHA, 'keep-alive']);
      }
    } finally {
      agent.destroy();
    }
  }, 120_000);
});
