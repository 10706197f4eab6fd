/**
 * Storage node failures (docs/storage.md): a node killed mid-push makes its repositories answer
 * 503 `storage_unavailable` while the other node's keep working; after its restart the push is
 * either complete with its event and pipeline or absent; after its volume is deleted, `triad
 * storage restore` brings back every acknowledged push of the three kinds. And a server killed
 * while its push runs on the node does not let another server's push overlap it (the node's lock).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { VcsKind } from '../../src/vcs/index.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { pipelineYaml, pushWith, userOn, type Pushed } from '../helpers/serve.ts';
import type { TestServer, TestUser } from '../helpers/server.ts';
import { startCluster, type Cluster, type StorageNodeProc } from '../helpers/storage-cluster.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

let c: Cluster;
let owner: TestUser;
const dirs: string[] = [];

beforeAll(async () => {
  c = await startCluster({ nodes: 2, servers: 2 });
  owner = await userOn(c.servers[0]!);
}, 120_000);

afterAll(async () => {
  await c?.stop();
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

const node = (name: string) =>
  c.nodes.find((n) => n.name === name && n.child.exitCode === null && n.child.signalCode === null)!;

/** Repositories made while only `name` takes new ones (the other drained). */
async function on<T>(name: string, make: () => Promise<T>): Promise<T> {
  const other = name === 'node-a' ? 'node-b' : 'node-a';
  expect((await c.run(['admin', 'storage', 'drain', '--node', other])).code).toBe(0);
  try {
    return await make();
  } finally {
    expect((await c.run(['admin', 'storage', 'undrain', '--node', other])).code).toBe(0);
  }
}

async function kill(n: StorageNodeProc): Promise<void> {
  n.child.kill('SIGKILL');
  await n.exited;
}

async function restart(n: StorageNodeProc): Promise<StorageNodeProc> {
  c.nodes.splice(c.nodes.indexOf(n), 1);
  return c.startNode(n.name, n.port, n.dir);
}

/** The node's lock history (its internal port, with the shared secret). */
async function locks(
  n: StorageNodeProc,
): Promise<{ now: { repo: string }[]; recent: { repo: string; since: number; until: number }[] }> {
  const r = await fetch(`${n.url}/internal/v1/locks`, {
    headers: { authorization: `Bearer ${c.secret}`, 'x-triad-storage-protocol': '1' },
  });
  return (await r.json()) as never;
}

async function until(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A git working copy of `r` pushing through `url`. */
async function gitWork(
  r: Pushed,
  url: string,
): Promise<{
  dir: string;
  push: (
    file: string,
    content: string | Buffer,
    ref?: string,
    force?: boolean,
  ) => Promise<{ code: number; head: string; err: string }>;
}> {
  const parent = await tempDir();
  dirs.push(parent);
  const dir = path.join(parent, 'w');
  const authed = withCreds(url, owner.token);
  await ok('git', ['clone', '-q', authed, dir], parent);
  return {
    dir,
    push: async (file, content, ref = 'main', force = false) => {
      await writeFile(dir, file, content);
      await ok('git', ['add', '-A'], dir);
      await ok('git', ['commit', '-q', '-m', file], dir);
      const head = (await ok('git', ['rev-parse', 'HEAD'], dir)).trim();
      const out = await sh('git', ['push', '-q', ...(force ? ['-f'] : []), authed, `HEAD:${ref}`], dir);
      return { code: out.code, head, err: out.stderr };
    },
  };
}

const db = () => ({ dbUrl: c.db }) as TestServer;

/**
 * A pre-receive hook on the node's copy of a git repository that holds each push's backend for
 * 3 s and writes when it started and ended (milliseconds) beside `marker`.
 */
async function slowHook(
  n: StorageNodeProc,
  id: number,
): Promise<{ started: () => Promise<boolean>; ended: () => Promise<number>; remove: () => Promise<void> }> {
  const hook = path.join(n.dir, 'repos', `${id}.git`, 'hooks', 'pre-receive');
  const marker = path.join(n.dir, `hook-${id}`);
  await fs.writeFile(
    hook,
    `#!/bin/sh\ncat >/dev/null\ndate +%s%3N > ${marker}.start\nsleep 3\ndate +%s%3N > ${marker}.end\n`,
    { mode: 0o755 },
  );
  return {
    started: () =>
      fs.stat(`${marker}.start`).then(
        () => true,
        () => false,
      ),
    ended: async () => {
      await until(
        'the hook to end',
        () =>
          fs.stat(`${marker}.end`).then(
            () => true,
            () => false,
          ),
        10_000,
      );
      return Number((await fs.readFile(`${marker}.end`, 'utf8')).trim());
    },
    remove: () => fs.rm(hook),
  };
}

describe('a storage node killed mid-push', () => {
  test('its repositories answer 503, the others work; after its restart the push is whole with its event and pipeline, or absent', async () => {
    const [victim, survivor] = [
      await on('node-a', () => pushWith(owner, { vcs: 'git' }, (w) => writeFile(w, 'a', 'a\n'))),
      await on('node-b', () => pushWith(owner, { vcs: 'git' }, (w) => writeFile(w, 'b', 'b\n'))),
    ];
    const a = node('node-a');
    // a hook on the node's repository holds the push's backend long enough to kill the node in it
    const hook = await slowHook(a, victim.id);
    const w = await gitWork(victim, `${c.servers[0]!.url}/${victim.org}/${victim.name}`);
    const pushing = w.push('.pipeline.yml', pipelineYaml([{ name: 'build', commands: ['true'] }]));
    await until('the push to run on the node', hook.started);
    await kill(a);
    const pushed = await pushing;
    expect(pushed.code).not.toBe(0);

    const api = c.servers[1]!.admin.as(owner.token);
    const down = await api.get(`/api/v1/repos/${victim.org}/${victim.name}/tree?rev=main`);
    expect(down.status).toBe(503);
    expect(down.body.error.code).toBe('storage_unavailable');
    expect(down.headers.get('retry-after')).toMatch(/^\d+$/);
    const clone = await sh('git', ['ls-remote', withCreds(victim.cloneUrl, owner.token)], w.dir);
    expect(clone.code).not.toBe(0);
    // the other node's repository: reads, clones and pushes work
    expect((await api.get(`/api/v1/repos/${survivor.org}/${survivor.name}/tree?rev=main`)).status).toBe(200);
    const other = await gitWork(survivor, `${c.servers[1]!.url}/${survivor.org}/${survivor.name}`);
    expect((await other.push('more', 'more\n')).code).toBe(0);
    // the repository metadata is not on the node: it still reads
    expect((await api.get(`/api/v1/repos/${victim.org}/${victim.name}`)).status).toBe(200);

    await hook.remove();
    await restart(a);
    const branch = async () => {
      const r = await api.get(`/api/v1/repos/${victim.org}/${victim.name}/branches`);
      if (r.status !== 200) {
        // (once seen as a 500 under heavy load: what the servers logged says why; their log is
        // written a moment after the answer)
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const logged = c.servers.flatMap((s) =>
          s
            .output()
            .split('\n')
            .filter((l) => /"level":(40|50)/.test(l)),
        );
        throw new Error(`branches answered ${r.status} ${r.text}; server errors:\n${logged.join('\n')}`);
      }
      return (r.body.data as { name: string; commit: { id: string } }[]).find((b) => b.name === 'main')
        ?.commit.id;
    };
    const head = await branch();
    const pipelinesFor = async () => {
      const r = await api.get(`/api/v1/repos/${victim.org}/${victim.name}/pipelines`);
      return (r.body.pipelines as { commit: string }[]).filter((p) => p.commit === pushed.head);
    };
    if (head === pushed.head) {
      // whole: its event and pipeline come once a server reconciles with the node again
      await until('the push to be recorded', async () => (await pipelinesFor()).length === 1, 40_000);
      const events = await outboxEvents(db(), victim.id);
      expect(events.some((e) => e.event_type === 'push' && e.payload.after === pushed.head)).toBe(true);
    } else {
      expect(head).toBe(victim.head);
      await new Promise((resolve) => setTimeout(resolve, 12_000)); // a reconciliation's time
      expect(await pipelinesFor()).toEqual([]);
      const events = await outboxEvents(db(), victim.id);
      expect(events.some((e) => e.event_type === 'push' && e.payload.after === pushed.head)).toBe(false);
    }
  }, 150_000);
});

describe('a lost volume restored from the backups', () => {
  test('every acknowledged push of the three kinds is back (clone compare)', async () => {
    const kinds: VcsKind[] = ['git', 'hg', 'fossil'];
    const made = await on('node-b', async () => {
      const out: Pushed[] = [];
      for (const vcs of kinds) out.push(await pushWith(owner, { vcs }, (w) => writeFile(w, 'one', '1\n')));
      return out;
    });
    const [g, h, f] = made as [Pushed, Pushed, Pushed];
    const work = await tempDir();
    dirs.push(work);
    // git: a second branch, a force push and a deletion, an annotated tag
    const gw = await gitWork(g, g.cloneUrl);
    expect((await gw.push('two', '2\n', 'side')).code).toBe(0);
    expect((await gw.push('three', '3\n')).code).toBe(0);
    await ok('git', ['reset', '-q', '--hard', 'HEAD~1'], gw.dir);
    expect((await gw.push('four', '4\n', 'main', true)).code).toBe(0);
    const authed = withCreds(g.cloneUrl, owner.token);
    expect((await sh('git', ['push', '-q', authed, ':side'], gw.dir)).code).toBe(0);
    await ok('git', ['tag', '-a', '-m', 'v1', 'v1'], gw.dir);
    expect((await sh('git', ['push', '-q', authed, 'v1'], gw.dir)).code).toBe(0);
    // hg: a bookmark made, moved and a second one deleted
    const hd = path.join(work, 'h');
    const hurl = withCreds(h.cloneUrl, owner.token);
    await ok('hg', ['clone', '-q', hurl, hd], work);
    await writeFile(hd, 'two', '2\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'two'], hd);
    await ok('hg', ['bookmark', 'feature'], hd);
    await ok('hg', ['bookmark', 'gone'], hd);
    await ok('hg', ['push', '-q', '-B', 'feature', '-B', 'gone', hurl], hd);
    await ok('hg', ['bookmark', '-d', 'gone'], hd);
    await sh('hg', ['push', '-q', '-B', 'gone', hurl], hd);
    // fossil: a second check-in
    const fd = path.join(work, 'f');
    const ffile = path.join(work, 'f.fossil');
    await ok('fossil', ['clone', '-B', `x:${owner.token}`, f.cloneUrl, ffile], work);
    await ok('fossil', ['open', '-f', '--workdir', fd, ffile], work);
    await writeFile(fd, 'two', '2\n');
    await ok('fossil', ['add', 'two'], fd);
    await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', 'two'], fd);
    await ok('fossil', ['push', '-B', `x:${owner.token}`, f.cloneUrl], fd);

    const state = async () => ({
      git: await ok('git', ['ls-remote', authed], work),
      hg: await (async () => {
        const d = path.join(work, `hc${Date.now()}`);
        await ok('hg', ['clone', '-q', '-U', hurl, d], work);
        return (
          (await ok('hg', ['log', '-R', d, '-T', '{node} {phase} {bookmarks} {tags}\n'], work)) +
          (await ok('hg', ['bookmarks', '-R', d], work))
        );
      })(),
      fossil: await (async () => {
        const file = path.join(work, `fc${Date.now()}.fossil`);
        await ok('fossil', ['clone', '-B', `x:${owner.token}`, f.cloneUrl, file], work);
        return ok('fossil', ['sql', '-R', file, 'select uuid from blob order by uuid'], work);
      })(),
    });
    const before = await state();
    const b = node('node-b');
    await kill(b);
    await fs.rm(path.join(b.dir, 'repos'), { recursive: true, force: true });
    const restarted = await restart(b);
    // before the restore its repositories are not there: 503, not an empty repository
    expect(
      (await c.servers[0]!.admin.as(owner.token).get(`/api/v1/repos/${g.org}/${g.name}/tree?rev=main`))
        .status,
    ).toBe(503);
    const restore = await c.run(['storage', 'restore'], restarted.env);
    expect(restore.output).toMatch(/restored \d+/);
    expect(restore.code).toBe(0);
    expect(await state()).toEqual(before);
  }, 180_000);
});

describe('a server killed while its push runs on the node', () => {
  test("another server's push to the repository waits for the first push's backend to end", async () => {
    const r = await on('node-a', () => pushWith(owner, { vcs: 'git' }, (w) => writeFile(w, 'x', 'x\n')));
    const a = node('node-a');
    const hook = await slowHook(a, r.id);
    const victim = c.servers[0]!;
    const first = await gitWork(r, `${victim.url}/${r.org}/${r.name}`);
    const pushing = first.push('first', '1\n');
    await until('the push to run on the node', hook.started);
    victim.child.kill('SIGKILL');
    await victim.exited;
    const second = await gitWork(r, `${c.servers[1]!.url}/${r.org}/${r.name}`);
    await hook.remove();
    const pushed = await second.push('second', '2\n', 'other');
    const done = Date.now();
    expect(pushed.code).toBe(0);
    await pushing;
    // the second push was answered only after the first push's backend ended on the node
    expect(done).toBeGreaterThanOrEqual(await hook.ended());
    // and none of its calls on the node began before then (the node's lock history)
    const history = (await locks(a)).recent.filter((l) => l.repo === `${r.id}.git`);
    const long = history.find((l) => l.until - l.since >= 2500);
    expect(long).toBeDefined();
    const later = history.filter((l) => l.since > long!.since);
    expect(later.length).toBeGreaterThan(0);
    for (const l of later) expect(l.since).toBeGreaterThanOrEqual(long!.until);
    // the first push went through on the node (its body had arrived), and is recorded
    const refs = await ok(
      'git',
      ['ls-remote', withCreds(`${c.servers[1]!.url}/${r.org}/${r.name}`, owner.token)],
      second.dir,
    );
    expect(refs).toContain('refs/heads/other');
    c.servers.splice(c.servers.indexOf(victim), 1);
  }, 120_000);
});
