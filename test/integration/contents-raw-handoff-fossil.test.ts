import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  BIG,
  BIG_SHA,
  catsOnConnections,
  download,
  producers,
  repoWithBigFile,
  startAndPause,
  until,
  world,
  type World,
} from './contents-raw-handoff-fixture.ts';

// Fossil's raw downloads handed over (TRIAD_RAW_SOCKET_HANDOFF): `fossil cat` cannot write to a
// non-blocking socket, so its pipe goes on to `cat`, the connection is made blocking and closed
// after the response (Connection: close).

describe('fossil: a raw download handed over to cat, on a connection closed after it', () => {
  let w: World;
  let base: string;
  let store: string;
  beforeAll(async () => {
    w = await world();
    ({ base, store } = await repoWithBigFile(w, 'fossil'));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });
  // the first bytes may reach the client before `cat` is running (on a loaded machine, well before)
  const catStarted = () => until(catsOnConnections, (c) => c.length > 0);
  const gone = () =>
    until(
      async () => [...(await producers(store)), ...(await catsOnConnections())],
      (p) => p.length === 0,
    );

  test('when a 60 MB file is downloaded, then cat writes it to the connection, every byte, and the connection is closed after', async () => {
    const { req, res } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
    expect([res.statusCode, res.headers['content-length'], res.headers.connection]).toEqual([
      200,
      String(BIG.length),
      'close',
    ]);
    // fossil cat writes to a pipe, cat from it to the connection
    expect(await producers(store)).toEqual([expect.objectContaining({ stdout: 'pipe' })]);
    expect(await catStarted()).toHaveLength(1);
    req.destroy();
    expect(await gone()).toEqual([]);

    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const big = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect(big).toEqual({
        status: 200,
        length: String(BIG.length),
        type: 'application/octet-stream',
        size: BIG.length,
        sha: BIG_SHA,
        reused: false,
        connection: 'close',
      });
      // the next request gets a new connection, and is answered right on it
      const small = await download(agent, `${w.s.url}${base}/raw/small.txt`);
      expect(small).toEqual({
        status: 200,
        length: '6',
        type: 'text/plain; charset=utf-8',
        size: 6,
        sha: createHash('sha256').update('small\n').digest('hex'),
        reused: false,
        connection: 'keep-alive',
      });
      const json = await download(agent, `${w.s.url}${base}/tree`);
      expect([json.status, json.reused]).toEqual([200, true]);
      const again = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([again.status, again.size, again.sha, again.reused, again.connection]).toEqual([
        200,
        BIG.length,
        BIG_SHA,
        true,
        'close',
      ]);
      expect(await gone()).toEqual([]);
    } finally {
      agent.destroy();
    }
  }, 180_000);

  test('when the server has closed the connection after the download, then the client sees it closed', async () => {
    const socket = net.connect(Number(new URL(w.s.url).port), new URL(w.s.url).hostname);
    let bytes = 0;
    socket.on('data', (c: Buffer) => (bytes += c.length));
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`GET ${base}/raw/big.bin HTTP/1.1\r\nHost: x\r\n\r\n`);
    await ended; // closed by the server (the test would time out otherwise)
    expect(bytes).toBeGreaterThan(BIG.length);
  }, 120_000);

  test('when the client goes away in the middle, then fossil cat and cat end', async () => {
    const { req } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
    expect(await catStarted()).toHaveLength(1);
    req.on('error', () => undefined);
    req.destroy();
    expect(await gone()).toEqual([]);
  }, 120_000);
});

describe('fossil, TRIAD_RAW_SOCKET_HANDOFF=false', () => {
  let w: World;
  let base: string;
  let store: string;
  beforeAll(async () => {
    w = await world({ TRIAD_RAW_SOCKET_HANDOFF: 'false' });
    ({ base, store } = await repoWithBigFile(w, 'fossil'));
  }, 180_000);
  afterAll(async () => {
    await w.s.close();
  });

  test('when a 60 MB file is downloaded, then the server relays it from the pipe, every byte, and keeps the connection', async () => {
    const { req } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
    expect(await producers(store)).toEqual([expect.objectContaining({ stdout: 'pipe' })]);
    expect(await catsOnConnections()).toEqual([]);
    req.destroy();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const r = await download(agent, `${w.s.url}${base}/raw/big.bin`);
      expect([r.status, r.length, r.size, r.sha, r.connection]).toEqual([
        200,
        String(BIG.length),
        BIG.length,
        BIG_SHA,
        'keep-alive',
      ]);
      const small = await download(agent, `${w.s.url}${base}/raw/small.txt`);
      expect([small.status, small.size, small.reused]).toEqual([200, 6, true]);
    } finally {
      agent.destroy();
    }
  }, 120_000);
});
