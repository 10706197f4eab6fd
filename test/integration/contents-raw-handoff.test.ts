import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  BIG,
  BIG_SHA,
  download,
  oneProducer,
  producersEnded,
  repoWithBigFile,
  startAndPause,
  world,
  type World,
} from './contents-raw-handoff-fixture.ts';
import { spawnedCount } from '../../src/vcs/process/spawner.ts';

// Raw downloads written to the connection by the reading process itself (TRIAD_RAW_SOCKET_HANDOFF).
// The server serves plain HTTP only (no TLS listener exists), so "a TLS connection is not handed
// over" has no case to test here; handOffSocket (src/http/api.ts) refuses a TLSSocket.

describe.each(['git', 'hg'] as const)('%s: a raw download handed over to the reading process', (vcs) => {
  let w: World;
  let base: string;
  let store: string;
  beforeAll(async () => {
    w = await world();
    ({ base, store } = await repoWithBigFile(w, vcs));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when a 60 MB file is downloaded, then the process writing it writes to the connection, and every byte arrives', async () => {
    const { req, res } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(String(BIG.length));
    expect(await oneProducer(store)).toEqual([expect.objectContaining({ stdout: 'tcp' })]);
    req.destroy();
    expect(await producersEnded(store)).toEqual([]);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const r = await download(agent, `${w.s.url}${base}/raw/big.bin`);
    agent.destroy();
    expect(r).toEqual({
      status: 200,
      length: String(BIG.length),
      type: 'application/octet-stream',
      size: BIG.length,
      sha: BIG_SHA,
      reused: false,
      connection: 'keep-alive',
    });
  }, 120_000);

  test('when the connection is kept alive, then the requests after a handed-over download answer on it, right', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const big = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([big.status, big.size, big.sha]).toEqual([200, BIG.length, BIG_SHA]);
      const small = await download(agent, `${w.s.url}${base}/raw/small.txt`);
      expect(small).toEqual({
        status: 200,
        length: '6',
        type: 'text/plain; charset=utf-8',
        size: 6,
        sha: createHash('sha256').update('small\n').digest('hex'),
        reused: true,
        connection: 'keep-alive',
      });
      const again = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([again.status, again.size, again.sha, again.reused]).toEqual([200, BIG.length, BIG_SHA, true]);
      const json = await download(agent, `${w.s.url}${base}/tree`);
      expect([json.status, json.reused]).toEqual([200, true]);
      // and every process that wrote to the connection has ended
      expect(await producersEnded(store)).toEqual([]);
    } finally {
      agent.destroy();
    }
  }, 180_000);

  test('when a HEAD asks for the file, then only the headers come back and the connection serves the next request right', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const head = await download(agent, `${w.s.url}${base}/raw/big.bin`, 'HEAD');
      expect(head).toMatchObject({ status: 200, length: String(BIG.length), size: 0 });
      const small = await download(agent, `${w.s.url}${base}/raw/small.txt`);
      expect([small.status, small.length, small.size, small.reused]).toEqual([200, '6', 6, true]);
      expect(await producersEnded(store)).toEqual([]);
    } finally {
      agent.destroy();
    }
  }, 120_000);

  test('when a small file is downloaded, then the pooled reader gives it: no process of its own; a large one is written by one', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await download(agent, `${w.s.url}${base}/raw/small.txt`); // the reader is warm
      let before = spawnedCount();
      const small = await download(agent, `${w.s.url}${base}/raw/small.txt`);
      expect([small.status, small.size, small.reused]).toEqual([200, 6, true]);
      expect(spawnedCount() - before).toBe(0);
      // git: one process reads the head (the content type), one writes the file; hg: one does both
      before = spawnedCount();
      const big = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([big.status, big.sha]).toEqual([200, BIG_SHA]);
      expect(spawnedCount() - before).toBe(vcs === 'git' ? 2 : 1);
    } finally {
      agent.destroy();
    }
  }, 120_000);

  test('when the client goes away in the middle, then the process writing to the connection ends', async () => {
    const { req } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
    expect(await oneProducer(store)).toHaveLength(1);
    req.on('error', () => undefined);
    req.destroy();
    expect(await producersEnded(store)).toEqual([]);
  }, 120_000);
});

describe.each(['git', 'hg'] as const)('%s, TRIAD_RAW_SOCKET_HANDOFF=false', (vcs) => {
  let w: World;
  let base: string;
  let store: string;
  beforeAll(async () => {
    w = await world({ TRIAD_RAW_SOCKET_HANDOFF: 'false' });
    ({ base, store } = await repoWithBigFile(w, vcs));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when a 60 MB file is downloaded, then the server relays it from a pipe, every byte', async () => {
    const { req } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
    expect(await oneProducer(store)).toEqual([expect.objectContaining({ stdout: 'pipe' })]);
    req.destroy();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const r = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([r.status, r.length, r.size, r.sha]).toEqual([200, String(BIG.length), BIG.length, BIG_SHA]);
      const small = await download(agent, `${w.s.url}${base}/raw/small.txt`);
      expect([small.status, small.size, small.reused]).toEqual([200, 6, true]);
    } finally {
      agent.destroy();
    }
  }, 120_000);
});

describe('hg: a connection offered but not taken', () => {
  let w: World;
  let store: string;
  let commit: string;
  beforeAll(async () => {
    w = await world();
    ({ store, commit } = await repoWithBigFile(w, 'hg'));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when the server reads the body instead (bytes were queued on the socket), then triadcat.py sends the rest on its pipe, every byte', async () => {
    const listener = net.createServer();
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const accepted = new Promise<net.Socket>((resolve) => listener.once('connection', resolve));
    const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
    const socket = await accepted;
    try {
      const file = await w.s.running.services.vcs.driver('hg').catFile(store, commit, 'big.bin', {
        size: undefined,
        nice: 0,
        head: 8000,
        socket,
      });
      expect(file.handOff).toBeDefined();
      const hash = createHash('sha256');
      let size = 0;
      for await (const c of file.body) {
        hash.update(c);
        size += c.length;
      }
      expect([file.size, size, hash.digest('hex')]).toEqual([BIG.length, BIG.length, BIG_SHA]);
    } finally {
      client.destroy();
      socket.destroy();
      listener.close();
    }
  }, 120_000);
});
