import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { addCommit } from './contents-fixture.ts';
import net from 'node:net';
import { driverFor, type VcsKind } from '../../src/vcs/index.ts';

// Raw downloads written to the connection by the reading process itself (TRIAD_RAW_SOCKET_HANDOFF).
// The server serves plain HTTP only (no TLS listener exists), so "a TLS connection is not handed
// over" has no case to test here; handOffSocket (src/http/api.ts) refuses a TLSSocket.

/** A 60 MB file of random bytes. */
const BIG = randomBytes(60 * 1024 * 1024);
const BIG_SHA = createHash('sha256').update(BIG).digest('hex');

type World = { s: TestServer; owner: TestUser; org: string };

async function world(env: Record<string, string> = {}): Promise<World> {
  const s = await startTestServer(env);
  const owner = await s.newUser();
  return { s, owner, org: await s.newOrg(owner) };
}

async function repoWithBigFile(
  w: World,
  vcs: VcsKind,
): Promise<{ base: string; store: string; commit: string }> {
  const name = uniq(`handoff${vcs}`);
  const r = await w.owner.client.post(`/api/v1/orgs/${w.org}/repos`, { name, vcs });
  expect(r.status).toBe(201);
  const store = w.s.running.services.repos.path({ id: r.body.data.id, vcs });
  const commit = await addCommit(vcs, store, { 'small.txt': 'small\n', 'big.bin': BIG });
  return { base: `/api/v1/repos/${w.org}/${name}`, store, commit };
}

/** One GET on `agent`: status, headers, sha256 and length of the body, whether the socket was reused. */
function download(agent: http.Agent, url: string, method = 'GET') {
  return new Promise<{
    status: number;
    length: string;
    type: string;
    size: number;
    sha: string;
    reused: boolean;
    connection: string;
  }>((resolve, reject) => {
    const q = http.request(url, { agent, method }, (res) => {
      const hash = createHash('sha256');
      let size = 0;
      res.on('data', (c: Buffer) => {
        hash.update(c);
        size += c.length;
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          length: String(res.headers['content-length']),
          type: String(res.headers['content-type']),
          size,
          sha: hash.digest('hex'),
          reused: q.reusedSocket,
          connection: String(res.headers.connection),
        }),
      );
      res.on('error', reject);
    });
    q.on('error', reject);
    q.end();
  });
}

/** Inodes of the machine's TCP sockets (a child's pipes are Unix socket pairs, never listed). */
async function tcpInodes(): Promise<Set<string>> {
  const inodes = new Set<string>();
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await fs.readFile(f, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const inode = line.trim().split(/\s+/)[9];
      if (inode !== undefined) inodes.add(inode);
    }
  }
  return inodes;
}

/**
 * The raw-download processes of `store` (not the pooled readers), with what their standard output
 * is: `tcp` (a connection: the process writes the response itself) or `pipe` (to the server).
 */
async function producers(store: string): Promise<{ cmd: string; stdout: string }[]> {
  const out: { cmd: string; stdout: string }[] = [];
  const tcp = await tcpInodes();
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const args = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (!args.some((a) => a.startsWith(store))) continue;
    const cmd = args.join(' ');
    if (!/cat-file blob|triadcat\.py| cat -R /.test(cmd)) continue;
    const tcpAt = async (fd: number) => {
      const link = await fs.readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      return tcp.has(/^socket:\[(\d+)\]$/.exec(link)?.[1] ?? '');
    };
    // git writes to its fd 1, triadcat.py to its fd 3
    out.push({ cmd, stdout: (await tcpAt(1)) || (await tcpAt(3)) ? 'tcp' : 'pipe' });
  }
  return out;
}

/** `cat` processes writing to one of this process's (the server's) connections: Fossil's hand-off. */
async function catsOnConnections(): Promise<number[]> {
  const mine = new Set<string>();
  for (const fd of await fs.readdir('/proc/self/fd')) {
    const link = await fs.readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (link.startsWith('socket:')) mine.add(link);
  }
  const tcp = await tcpInodes();
  const out: number[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const args = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (args[0] !== 'cat') continue;
    const link = await fs.readlink(`/proc/${pid}/fd/1`).catch(() => '');
    if (mine.has(link) && tcp.has(/^socket:\[(\d+)\]$/.exec(link)?.[1] ?? '')) out.push(Number(pid));
  }
  return out;
}

/** Starts a download of `url`, reads its first chunk and pauses: the request and its response. */
function startAndPause(url: string) {
  return new Promise<{ req: http.ClientRequest; res: http.IncomingMessage }>((resolve, reject) => {
    const req = http.get(url, (res) => {
      res.once('data', () => {
        res.pause();
        resolve({ req, res });
      });
    });
    req.on('error', reject);
  });
}

async function until<T>(probe: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  let v = await probe();
  // generous: a loaded machine
  for (let i = 0; i < 300 && !done(v); i++) {
    await new Promise((r) => setTimeout(r, 100));
    v = await probe();
  }
  return v;
}

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
    expect(await producers(store)).toEqual([expect.objectContaining({ stdout: 'tcp' })]);
    req.destroy();
    expect(
      await until(
        () => producers(store),
        (p) => p.length === 0,
      ),
    ).toEqual([]);
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
      expect(
        await until(
          () => producers(store),
          (p) => p.length === 0,
        ),
      ).toEqual([]);
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
      expect(
        await until(
          () => producers(store),
          (p) => p.length === 0,
        ),
      ).toEqual([]);
    } finally {
      agent.destroy();
    }
  }, 120_000);

  test('when the client goes away in the middle, then the process writing to the connection ends', async () => {
    const { req } = await startAndPause(`${w.s.url}${base}/raw/big.bin`);
    expect(await producers(store)).toHaveLength(1);
    req.on('error', () => undefined);
    req.destroy();
    expect(
      await until(
        () => producers(store),
        (p) => p.length === 0,
      ),
    ).toEqual([]);
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
    expect(await producers(store)).toEqual([expect.objectContaining({ stdout: 'pipe' })]);
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
    expect(await catsOnConnections()).toHaveLength(1);
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
    expect(await catsOnConnections()).toHaveLength(1);
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
      const file = await driverFor('hg').catFile(store, commit, 'big.bin', {
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
