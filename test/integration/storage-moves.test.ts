/**
 * Moving repositories between storage nodes (`triad admin repo move`, docs/storage.md) while
 * clients clone and push in a loop: no clone fails, no acknowledged push is lost, and the
 * repository ends on the other node with its files gone from the first. Also a drained node gets
 * no new repositories, and a move to an unknown node is refused with the repository left where it was.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { VcsKind } from '../../src/vcs/index.ts';
import { pushWith, userOn, type Pushed } from '../helpers/serve.ts';
import type { TestUser } from '../helpers/server.ts';
import { startCluster, type Cluster } from '../helpers/storage-cluster.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';
import { waitUntil } from '../helpers/wait.ts';

let c: Cluster;
let owner: TestUser;

beforeAll(async () => {
  c = await startCluster({ nodes: 2, servers: 2 });
  owner = await userOn(c.servers[0]!);
}, 120_000);

afterAll(async () => {
  await c?.stop();
});

/** A working copy that pushes one new commit per call through `url`; answers the commit's id. */
async function pusher(
  vcs: VcsKind,
  r: Pushed,
  url: string,
  work: string,
): Promise<(i: number) => Promise<string>> {
  const authed = withCreds(url, owner.token);
  if (vcs === 'git') {
    await ok('git', ['clone', '-q', authed, work], path.dirname(work));
    return async (i) => {
      await writeFile(work, `n${i}.txt`, `${i}\n`);
      await ok('git', ['add', '-A'], work);
      await ok('git', ['commit', '-q', '-m', `n${i}`], work);
      await ok('git', ['push', '-q', authed, 'HEAD:main'], work);
      return (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
    };
  }
  if (vcs === 'hg') {
    await ok('hg', ['clone', '-q', authed, work], path.dirname(work));
    return async (i) => {
      await writeFile(work, `n${i}.txt`, `${i}\n`);
      await ok('hg', ['commit', '-q', '-A', '-m', `n${i}`], work);
      await ok('hg', ['push', '-q', authed], work);
      return (await ok('hg', ['log', '-r', '.', '-T', '{node}'], work)).trim();
    };
  }
  const file = `${work}.fossil`;
  await ok('fossil', ['clone', '-B', `x:${owner.token}`, url, file], path.dirname(work));
  await ok('fossil', ['open', '-f', '--workdir', work, file], path.dirname(work));
  await ok('fossil', ['settings', 'autosync', 'off'], work);
  return async (i) => {
    await writeFile(work, `n${i}.txt`, `${i}\n`);
    await ok('fossil', ['add', `n${i}.txt`], work);
    await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', `n${i}`], work);
    await ok('fossil', ['push', '-B', `x:${owner.token}`, url], work);
    return /^checkout:\s+([0-9a-f]+)/m.exec(await ok('fossil', ['info'], work))?.[1] ?? '';
  };
}

/** Clones `url` into a new directory; answers the clone's commit ids (all of them). */
async function cloneIds(
  vcs: VcsKind,
  url: string,
  dir: string,
): Promise<{ code: number; ids: string[]; err: string }> {
  const parent = path.dirname(dir);
  if (vcs === 'git') {
    const r = await sh('git', ['clone', '-q', '--bare', withCreds(url, owner.token), dir], parent);
    if (r.code !== 0) return { code: r.code, ids: [], err: r.stderr };
    return {
      code: 0,
      ids: (await ok('git', ['log', '--all', '--format=%H'], dir)).split('\n').filter(Boolean),
      err: '',
    };
  }
  if (vcs === 'hg') {
    const r = await sh('hg', ['clone', '-q', '-U', withCreds(url, owner.token), dir], parent);
    if (r.code !== 0) return { code: r.code, ids: [], err: r.stderr };
    return {
      code: 0,
      ids: (await ok('hg', ['log', '-T', '{node}\n'], dir)).split('\n').filter(Boolean),
      err: '',
    };
  }
  const r = await sh('fossil', ['clone', '-B', `x:${owner.token}`, url, `${dir}.fossil`], parent);
  if (r.code !== 0) return { code: r.code, ids: [], err: r.stderr + r.stdout };
  const sql = await ok(
    'fossil',
    [
      'sql',
      '-R',
      `${dir}.fossil`,
      "select uuid from blob join event on event.objid = blob.rid where event.type = 'ci'",
    ],
    parent,
  );
  return {
    code: 0,
    ids: sql
      .split('\n')
      .map((l) => l.replace(/'/g, '').trim())
      .filter(Boolean),
    err: '',
  };
}

describe.each(['git', 'hg', 'fossil'] as VcsKind[])('%s', (vcs) => {
  test('moved to the other node and back while clients clone and push: no failed clone, no lost push', async () => {
    const r = await pushWith(owner, { vcs }, async (w) => writeFile(w, 'README', 'r\n'));
    const [first] = await c.holders(r.id, vcs);
    const other = first === 'node-a' ? 'node-b' : 'node-a';
    const [a, b] = c.servers;
    const dir = await tempDir();
    let stop = false;
    try {
      const push = await pusher(vcs, r, `${b!.url}/${r.org}/${r.name}`, path.join(dir, 'work'));
      const pushed: string[] = [];
      const cloneFailures: string[] = [];
      let clones = 0;
      const pushFailures: string[] = [];
      const pushing = (async () => {
        for (let i = 0; !stop; i += 1) {
          try {
            pushed.push(await push(i));
          } catch (e) {
            pushFailures.push(String(e));
            break;
          }
        }
      })();
      const cloning = (async () => {
        for (let i = 0; !stop; i += 1) {
          const out = await cloneIds(vcs, `${a!.url}/${r.org}/${r.name}`, path.join(dir, `c${i}`));
          clones += 1;
          if (out.code !== 0) {
            cloneFailures.push(out.err);
            break;
          }
        }
      })();
      /** At least one more clone and one more push since the last call (or a failure). */
      let seen = [0, 0];
      const progress = async () => {
        const [c0, p0] = seen;
        await waitUntil(
          'a clone and a push more',
          () => (clones > c0! && pushed.length > p0!) || cloneFailures.length + pushFailures.length > 0,
          60_000,
        );
        seen = [clones, pushed.length];
      };
      await progress();
      const there = await c.run(['admin', 'repo', 'move', `${r.org}/${r.name}`, '--to', other], {
        TRIAD_STORAGE: 'nodes',
      });
      expect(there.output).toContain(`to ${other}`);
      expect(there.code).toBe(0);
      expect(await c.holders(r.id, vcs)).toEqual([other]);
      await progress();
      const back = await c.run(['admin', 'repo', 'move', `${r.org}/${r.name}`, '--to', first!], {
        TRIAD_STORAGE: 'nodes',
      });
      if (back.code !== 0) console.log(back.output);
      expect(back.code).toBe(0);
      await progress();
      stop = true;
      await Promise.all([pushing, cloning]);
      if (cloneFailures.length + pushFailures.length > 0) {
        console.log(
          cloneFailures,
          pushFailures,
          a!.output().slice(-4000),
          b!.output().slice(-4000),
          there.output,
          back.output,
        );
      }
      expect(cloneFailures).toEqual([]);
      expect(pushFailures).toEqual([]);
      expect(clones).toBeGreaterThan(2);
      expect(pushed.length).toBeGreaterThan(2);
      const final = await cloneIds(vcs, `${b!.url}/${r.org}/${r.name}`, path.join(dir, 'final'));
      expect(final.code).toBe(0);
      // (Fossil's `info` shows a prefix of the check-in's id)
      const lost = pushed.filter((id) => !final.ids.some((x) => x.startsWith(id)));
      expect(lost).toEqual([]);
      expect(await c.holders(r.id, vcs)).toEqual([first]);
    } finally {
      stop = true;
      await new Promise((resolve) => setTimeout(resolve, 3000)); // the loops' last runs
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe('locks of the source', () => {
  test('when an hg reader held the store lock while the repository was copied, then the copy has no lock and takes pushes', async () => {
    const r = await pushWith(owner, { vcs: 'hg' }, async (w) => writeFile(w, 'README', 'r\n'));
    const [first] = await c.holders(r.id, 'hg');
    const other = first === 'node-a' ? 'node-b' : 'node-a';
    const repoDir = (node: string) =>
      path.join(c.nodes.find((n) => n.name === node)!.dir, 'repos', `${r.id}.hg`);
    // what a streaming clone's worker holds on the source while it scans: a live process's lock
    await fs.symlink(`${os.hostname()}:${process.pid}`, path.join(repoDir(first!), '.hg', 'store', 'lock'));
    const moved = await c.run(['admin', 'repo', 'move', `${r.org}/${r.name}`, '--to', other], {
      TRIAD_STORAGE: 'nodes',
    });
    expect(moved.code).toBe(0);
    expect(await c.holders(r.id, 'hg')).toEqual([other]);
    const lock = await fs.lstat(path.join(repoDir(other), '.hg', 'store', 'lock')).catch(() => undefined);
    expect(lock).toBeUndefined();
    const dir = await tempDir();
    const push = await pusher('hg', r, `${c.servers[0]!.url}/${r.org}/${r.name}`, path.join(dir, 'work'));
    expect(await push(1)).toMatch(/^[0-9a-f]{40}$/);
  }, 120_000);
});

describe('drains and refusals', () => {
  test('a drained node gets no new repositories; a move to an unknown node is refused', async () => {
    expect((await c.run(['admin', 'storage', 'drain', '--node', 'node-a'])).code).toBe(0);
    try {
      for (let i = 0; i < 3; i += 1) {
        const r = await pushWith(owner, { vcs: 'git' }, async (w) => writeFile(w, 'f', `${i}\n`));
        expect(await c.holders(r.id, 'git')).toEqual(['node-b']);
      }
      const list = await c.run(['admin', 'storage', 'list']);
      expect(list.output).toMatch(/node-a\tdraining/);
    } finally {
      expect((await c.run(['admin', 'storage', 'undrain', '--node', 'node-a'])).code).toBe(0);
    }
    const r = await pushWith(owner, { vcs: 'git' }, async (w) => writeFile(w, 'f', 'x\n'));
    const before = await c.holders(r.id, 'git');
    const refused = await c.run(['admin', 'repo', 'move', `${r.org}/${r.name}`, '--to', 'node-z'], {
      TRIAD_STORAGE: 'nodes',
    });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain('no storage node named node-z');
    expect(await c.holders(r.id, 'git')).toEqual(before);
  });
});
