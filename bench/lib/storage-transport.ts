/**
 * Clones and pushes with the stock clients for bench/storage-nodes.ts, as bench/transport.ts runs
 * them: a full clone (`git clone --bare`, `hg clone -U`, `fossil clone`) and a push of five small
 * new commits from a working copy of the generated history (git and hg with the token in the URL,
 * Fossil with `-B`), two targets side by side, alternating which goes first.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import type { VcsKind } from '../../src/vcs/index.ts';
import { ENV } from '../repos.ts';
import { treeCpuMs } from './cpu.ts';

const exec = promisify(execFile);
const HG = '/usr/bin/hg';
const run = async (cmd: string, args: string[], cwd: string): Promise<string> =>
  (await exec(cmd, args, { cwd, env: ENV, maxBuffer: 512 * 1024 * 1024 })).stdout;

/** A repository on a server: `base` (`http://127.0.0.1:<port>`), `org/name`, a token that may push. */
export type Target = { base: string; org: string; name: string; token: string };

const url = (t: Target, auth: boolean) =>
  `${auth ? t.base.replace('://', `://x:${t.token}@`) : t.base}/${t.org}/${t.name}`;

/** Wall-clock seconds of a step, and the CPU seconds the benchmark's process tree used meanwhile. */
export type Timing = { s: number; cpu: number };

export async function timed(fn: () => Promise<unknown>): Promise<Timing> {
  const c = await treeCpuMs();
  const t = performance.now();
  await fn();
  const s = (performance.now() - t) / 1000;
  return { s, cpu: ((await treeCpuMs()) - c) / 1000 };
}

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
};

/**
 * One full clone of `t` into a new directory under `tmp` (removed afterwards): anonymous, or with
 * `auth` the target's token (a Fossil clone by a token that may write is a sync that may push:
 * each of its round trips goes the push path).
 */
export async function cloneOnce(kind: VcsKind, t: Target, tmp: string, auth = false): Promise<Timing> {
  const dir = await fs.mkdtemp(path.join(tmp, 'clone-'));
  const dest = path.join(dir, 'c');
  const fossilAuth = auth ? ['-B', `x:${t.token}`] : [];
  try {
    return await timed(() =>
      kind === 'git'
        ? run('git', ['clone', '-q', '--bare', url(t, auth), dest], dir)
        : kind === 'hg'
          ? run(HG, ['clone', '-q', '-U', url(t, auth), dest], dir)
          : run('fossil', ['clone', ...fossilAuth, url(t, false), `${dest}.fossil`], dir),
    );
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** A working copy of the generated history that commits five small files a round and pushes them. */
export type Pusher = {
  fiveCommits: (round: string) => Promise<void>;
  push: (t: Target) => Promise<Timing>;
};

export async function pusher(kind: VcsKind, from: string, dir: string): Promise<Pusher> {
  await fs.mkdir(dir, { recursive: true });
  const work = path.join(dir, 'work');
  const fossilRepo = path.join(dir, 'src.fossil');
  if (kind === 'git') await run('git', ['clone', '-q', from, work], dir);
  else if (kind === 'hg') await run(HG, ['clone', '-q', from, work], dir);
  else {
    // the same project code as the generated repository both targets are copies of
    await fs.copyFile(from, fossilRepo);
    await run('fossil', ['open', '-f', '--workdir', work, fossilRepo], dir);
    await run('fossil', ['settings', 'autosync', 'off'], work);
  }
  return {
    fiveCommits: async (round) => {
      for (let i = 1; i <= 5; i++) {
        const file = `increment-${round}-${i}.txt`;
        await fs.writeFile(path.join(work, file), `increment ${round} ${i}\n`);
        if (kind === 'git') {
          await run('git', ['add', file], work);
          await run('git', ['-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '-m', file], work);
        } else if (kind === 'hg') {
          await run(HG, ['add', '-q', file], work);
          await run(HG, ['commit', '-u', 'b', '-m', file], work);
        } else {
          await run('fossil', ['add', file], work);
          await run('fossil', ['commit', '--no-warnings', '-m', file], work);
        }
      }
    },
    push: (t) =>
      timed(() =>
        kind === 'git'
          ? run('git', ['push', '-q', url(t, true), 'main'], work)
          : kind === 'hg'
            ? run(HG, ['push', '-q', url(t, true)], work)
            : run('fossil', ['push', '--once', '-R', fossilRepo, '-B', `x:${t.token}`, url(t, false)], dir),
      ),
  };
}

/**
 * `runs` rounds of `step` on targets `a` and `b`, the first of each round alternating (the
 * second of a round finds the client's files in the page cache, and that should favour neither);
 * `before` runs untimed at the start of each round (new commits to push).
 */
export async function sideBySide(o: {
  runs: number;
  a: Target;
  b: Target;
  step: (t: Target) => Promise<Timing>;
  before?: (round: number) => Promise<void>;
}): Promise<{ a: Timing[]; b: Timing[] }> {
  const out = { a: [] as Timing[], b: [] as Timing[] };
  for (let r = 0; r < o.runs; r++) {
    await o.before?.(r);
    if (r % 2 === 0) {
      out.a.push(await o.step(o.a));
      out.b.push(await o.step(o.b));
    } else {
      out.b.push(await o.step(o.b));
      out.a.push(await o.step(o.a));
    }
  }
  return out;
}

/** GETs of `url` on one keep-alive connection (anonymous), the body read and dropped. */
export function getter(): { get: (url: string) => Promise<void>; close: () => void } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (url: string) =>
    new Promise<void>((resolve, reject) => {
      http
        .get(url, { agent }, (res) => {
          res.resume();
          res.on('error', reject);
          res.on('end', () =>
            (res.statusCode ?? 500) >= 400 ? reject(new Error(`${url}: ${res.statusCode}`)) : resolve(),
          );
        })
        .on('error', reject);
    });
  return { get, close: () => agent.destroy() };
}
