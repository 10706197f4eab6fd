import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import { newRepo, serverWithOrg, type OrgServer } from '../helpers/factories.ts';
import { addCommit } from './contents-fixture.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

// Shared by the raw download hand-off tests (contents-raw-handoff*.test.ts).

/** A 60 MB file of random bytes. */
export const BIG = randomBytes(60 * 1024 * 1024);
export const BIG_SHA = createHash('sha256').update(BIG).digest('hex');

export type World = OrgServer;

/**
 * A server whose raw downloads are read from the store every time (the raw cache off): these
 * tests are about the processes that read it; contents-raw-cache.test.ts tests the cache.
 */
export async function world(env: Record<string, string> = {}): Promise<World> {
  return serverWithOrg({ TRIAD_RAW_CACHE_BYTES: '0', ...env });
}

export async function repoWithBigFile(
  w: World,
  vcs: VcsKind,
): Promise<{ base: string; store: string; commit: string }> {
  const repo = await newRepo(w.owner, w.org, { vcs });
  const store = w.s.running.services.repos.path(repo);
  const commit = await addCommit(vcs, store, { 'small.txt': 'small\n', 'big.bin': BIG });
  return { base: repo.api, store, commit };
}

/** One GET on `agent`: status, headers, sha256 and length of the body, whether the socket was reused. */
export function download(agent: http.Agent, url: string, method = 'GET') {
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
export async function tcpInodes(): Promise<Set<string>> {
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
export async function producers(store: string): Promise<{ cmd: string; stdout: string }[]> {
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
export async function catsOnConnections(): Promise<number[]> {
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
export function startAndPause(url: string) {
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

export async function until<T>(probe: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  let v = await probe();
  // generous: a loaded machine
  for (let i = 0; i < 300 && !done(v); i++) {
    await new Promise((r) => setTimeout(r, 100));
    v = await probe();
  }
  return v;
}

/**
 * The raw-download processes of `store` once exactly one runs (a process of an earlier download,
 * killed, may still be on its way out), or the last seen.
 */
export function oneProducer(store: string): Promise<{ cmd: string; stdout: string }[]> {
  return until(
    () => producers(store),
    (p) => p.length === 1,
  );
}

/** The raw-download processes of `store` once they have all ended (an empty list), or the last seen. */
export function producersEnded(store: string): Promise<{ cmd: string; stdout: string }[]> {
  return until(
    () => producers(store),
    (p) => p.length === 0,
  );
}
