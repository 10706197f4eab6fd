/**
 * Source archives pass the same concurrency cap and queue as the clone URLs' backends: with two
 * runs at once and two waiting, six anonymous archive requests start two archive processes, two
 * wait, two are refused with 503 and Retry-After (and so is a clone while the cap is full); a
 * client that leaves while waiting gives its place up; every request that waited is served.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, test } from '@jest/globals';
import { WorkingCopy } from '../helpers/clients.ts';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { tempDir } from '../helpers/vcs.ts';
import { waitFor } from '../helpers/wait.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

const exec = promisify(execFile);
let s: TestServer;
let owner: TestUser;
let org: string;

withOrgServer(
  {
    TRIAD_TRANSPORT_CONCURRENCY: '2',
    TRIAD_TRANSPORT_QUEUE: '2',
    TRIAD_TRANSPORT_RETRY_AFTER_SECONDS: '7',
    TRIAD_HG_WORKERS: '1',
  },
  (w) => ({ s, owner, org } = w),
);

const DEFAULT: Record<VcsKind, string> = { git: 'main', hg: 'default', fossil: 'trunk' };

/** A wire-protocol request at the clone URL, as a clone of that kind starts. */
function cloneRequest(kind: VcsKind, base: string): Promise<Response> {
  const signal = AbortSignal.timeout(30_000);
  switch (kind) {
    case 'git':
      return fetch(`${base}/info/refs?service=git-upload-pack`, { signal });
    case 'hg':
      return fetch(`${base}?cmd=capabilities`, { signal });
    case 'fossil':
      return fetch(base, {
        method: 'POST',
        headers: { 'content-type': 'application/x-fossil' },
        body: 'x',
        signal,
      });
  }
}

/** Archive processes (git archive, hg archive, fossil tarball) working on `dir`. */
async function archiveProcesses(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const argv = (await fs.readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (argv.some((a) => a.startsWith(dir)) && argv.some((a) => a === 'archive' || a === 'tarball'))
      found.push(argv.join(' '));
  }
  return found;
}

/**
 * An archive download whose client reads the response head and then stops reading: the archive
 * process stalls on its full pipe, holding whatever it holds, until the socket is destroyed.
 */
function stalledDownload(url: string): Promise<{ head: string; socket: net.Socket }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname);
    let buf = Buffer.alloc(0);
    socket.on('error', reject);
    socket.on('connect', () =>
      socket.write(`GET ${u.pathname} HTTP/1.1\r\nhost: ${u.host}\r\nconnection: close\r\n\r\n`),
    );
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.pause();
      socket.removeAllListeners('data');
      resolve({ head: buf.toString('latin1', 0, end), socket });
    });
  });
}

async function tarEntries(bytes: Buffer): Promise<string[]> {
  const file = path.join(await tempDir('triad-archive-'), 'a.tar.gz');
  await fs.writeFile(file, bytes);
  return (await exec('tar', ['-tzf', file])).stdout.split('\n').filter((l) => l !== '' && !l.endsWith('/'));
}

describe('source archives under the transports concurrency cap', () => {
  test.each<VcsKind>(['git', 'hg', 'fossil'])(
    'when six anonymous %s archive requests arrive with a cap of two and a queue of two, then two run, two wait, two get 503 with Retry-After, and the waiting ones are served once the running ones end',
    async (kind) => {
      const name = uniq(kind);
      const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, vcs: kind, is_private: false });
      expect(r.status).toBe(201);
      const dir = path.join(s.dataDir, 'repos', `${r.body.data.id}.${kind}`);
      const w = await WorkingCopy.clone(kind, r.body.data.clone_url, owner.token);
      // incompressible and larger than the socket and pipe buffers: a client that stops reading
      // stalls the archive
      await w.commit('big.bin', 16 * 1024 * 1024, 'big');
      expect((await w.push()).code).toBe(0);
      const url = `${s.url}/api/v1/repos/${org}/${name}/archive/${DEFAULT[kind]}.tar.gz`;
      const limiter = s.running.services.transports.limiter;
      const stalled: net.Socket[] = [];
      try {
        for (let i = 0; i < 2; i += 1) {
          const d = await stalledDownload(url);
          stalled.push(d.socket);
          expect(d.head).toMatch(/^HTTP\/1\.1 200/);
        }
        // the two running archives hold the cap's two slots
        expect(limiter.load()).toEqual({ active: 2, waiting: 0 });
        const waiting = [1, 2].map(() => {
          const ac = new AbortController();
          return { ac, res: fetch(url, { signal: ac.signal }) };
        });
        await waitFor('two archive requests in the queue', () =>
          Promise.resolve(limiter.load().waiting === 2 ? true : undefined),
        );
        for (let i = 0; i < 2; i += 1) {
          const refused = await s.anon.get(`/api/v1/repos/${org}/${name}/archive/${DEFAULT[kind]}.tar.gz`);
          expect(refused.status).toBe(503);
          expect(refused.headers.get('retry-after')).toBe('7');
          expect(refused.body.error.code).toBe('service_unavailable');
        }
        // no archive process beyond the cap
        expect((await archiveProcesses(dir)).length).toBeLessThanOrEqual(2);
        // the cap is the clones' one: a clone is refused the same way, the API still answers
        const clone = await cloneRequest(kind, `${s.url}/${org}/${name}`);
        expect(clone.status).toBe(503);
        expect(clone.headers.get('retry-after')).toBe('7');
        await clone.arrayBuffer();
        expect((await s.anon.get(`/api/v1/repos/${org}/${name}`)).status).toBe(200);

        // a client that leaves while waiting gives its place up
        waiting[0]!.ac.abort();
        await expect(waiting[0]!.res).rejects.toThrow();
        await waitFor('the queue to shrink', () =>
          Promise.resolve(limiter.load().waiting === 1 ? true : undefined),
        );

        // the running archives' clients leave: their processes end, the waiting request is served
        for (const sock of stalled.splice(0)) sock.destroy();
        const served = await waiting[1]!.res;
        expect(served.status).toBe(200);
        const entries = await tarEntries(Buffer.from(await served.arrayBuffer()));
        expect(entries.some((e) => e.endsWith('/big.bin'))).toBe(true);
        await waitFor('the slots to be free', () => Promise.resolve(limiter.idle() ? true : undefined));
        await waitFor('the archive processes to end', async () =>
          (await archiveProcesses(dir)).length === 0 ? true : undefined,
        );
        // a HEAD takes a slot and gives it back without starting a process
        const head = await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(30_000) });
        expect(head.status).toBe(200);
        expect(limiter.idle()).toBe(true);
      } finally {
        for (const sock of stalled) sock.destroy();
      }
    },
    180_000,
  );
});
