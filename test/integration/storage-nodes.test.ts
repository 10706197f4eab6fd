/**
 * Storage nodes end to end (docs/storage.md): two servers and two storage nodes as processes on
 * loopback, with real PostgreSQL and MinIO and no repository directory shared between servers
 * and nodes. Clone, push, contents, raw files, archives, pull request merges and tag creation for
 * the three kinds through either server, with repositories placed on both nodes.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import type { VcsKind } from '../../src/vcs/index.ts';
import { MAINLINE, PrRepo, settled } from '../helpers/pulls.ts';
import { pushWith, userOn, type Pushed } from '../helpers/serve.ts';
import { uniq, type TestUser } from '../helpers/server.ts';
import { startCluster, type Cluster } from '../helpers/storage-cluster.ts';
import { ok, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

let c: Cluster;
let owner: TestUser;
const repos = new Map<VcsKind, Pushed>();
const KINDS: VcsKind[] = ['git', 'hg', 'fossil'];

beforeAll(async () => {
  c = await startCluster({ nodes: 2, servers: 2 });
  owner = await userOn(c.servers[0]!);
  for (const vcs of KINDS) {
    repos.set(
      vcs,
      await pushWith(owner, { vcs }, async (w) => {
        await writeFile(w, 'README.md', `# ${vcs}\n`);
        await writeFile(w, 'src/big.bin', Buffer.alloc(300 * 1024, 7));
      }),
    );
  }
}, 180_000);

afterAll(async () => {
  await c?.stop();
});

describe('placement', () => {
  test('repositories are spread over both nodes, each held by exactly one', async () => {
    const where = new Set<string>();
    for (const [vcs, r] of repos) {
      const h = await c.holders(r.id, vcs);
      expect(h).toHaveLength(1);
      where.add(h[0]!);
    }
    expect(where.size).toBe(2);
    const list = await c.run(['admin', 'storage', 'list']);
    expect(list.code).toBe(0);
    expect(list.output).toMatch(/node-a\tup\thealthy/);
    expect(list.output).toMatch(/node-b\tup\thealthy/);
  });

  test('when two nodes on one volume report free rooms a moment apart across a whole GiB, then a new repository goes to the one with fewer repositories', async () => {
    const GIB = 2 ** 30;
    const MIB = 2 ** 20;
    const pgc = new pg.Client({ connectionString: c.db });
    await pgc.connect();
    try {
      const counts = await pgc.query<{ name: string }>(
        `select n.name, (select count(*)::int from repos r where r.storage_node = n.name) as held
           from storage_nodes n order by held, n.name`,
      );
      const [fewer, other] = counts.rows.map((r) => r.name) as [string, string];
      // the other reports 2 MiB more: just above a whole GiB, the first just below; the
      // heartbeats (which would report the real room again) wait behind this row lock meanwhile
      const room = { [fewer]: 40 * GIB - MIB, [other]: 40 * GIB + MIB };
      for (let attempt = 0; ; attempt += 1) {
        await pgc.query(
          `update storage_nodes set free_bytes = case name when $1 then $2::bigint else $3::bigint end,
             heartbeat_at = now() where name in ($1, $4)`,
          [fewer, room[fewer], room[other], other],
        );
        await pgc.query('begin');
        const locked = await pgc.query<{ name: string; free: string }>(
          'select name, free_bytes::text as free from storage_nodes for no key update',
        );
        if (locked.rows.every((r) => Number(r.free) === room[r.name])) break;
        await pgc.query('rollback'); // a heartbeat came in between
        if (attempt === 5) throw new Error('the heartbeats kept rewriting the free rooms');
      }
      const org = uniq('org');
      expect((await owner.client.post('/api/v1/orgs', { name: org })).status).toBe(201);
      const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo'), vcs: 'git' });
      expect(r.status).toBe(201);
      expect(await c.holders(r.body.data.id as number, 'git')).toEqual([fewer]);
    } finally {
      await pgc.query('rollback');
      await pgc.end();
    }
  });
});

describe("a node's internal port", () => {
  test('refuses a wrong secret (401) and another protocol version (400, saying so); probes need none', async () => {
    const n = c.nodes[0]!;
    const call = { repo: '1.git', kind: 'git', target: 'driver', method: 'snapshot', args: [] };
    const post = (headers: Record<string, string>) =>
      fetch(`${n.url}/internal/v1/call`, { method: 'POST', headers, body: JSON.stringify(call) });
    const wrong = await post({ authorization: 'Bearer not-the-secret', 'x-triad-storage-protocol': '1' });
    expect(wrong.status).toBe(401);
    const none = await post({ 'x-triad-storage-protocol': '1' });
    expect(none.status).toBe(401);
    const old = await post({ authorization: `Bearer ${c.secret}`, 'x-triad-storage-protocol': '0' });
    expect(old.status).toBe(400);
    expect(((await old.json()) as { error: { message: string } }).error.message).toContain(
      'this node speaks 1',
    );
    expect((await fetch(`${n.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${n.url}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${n.url}/metrics`)).text();
    expect(metrics).toContain('triad_storage_request_duration_seconds');
  });
});

/** Internal calls a node answered so far (its metrics). */
async function callsOn(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = /triad_storage_request_duration_seconds_count\{route="call",outcome="ok"\} (\d+)/.exec(text);
  return Number(m?.[1] ?? 0);
}

describe.each(KINDS)('%s through either server', (vcs) => {
  test('a contents read at a revision is one round trip to the node', async () => {
    const r = repos.get(vcs)!;
    const [holder] = await c.holders(r.id, vcs);
    const n = c.nodes.find((x) => x.name === holder)!;
    const u = c.servers[1]!.admin.as(owner.token);
    await u.get(`/api/v1/repos/${r.org}/${r.name}/blob/README.md`); // warm: the repository's lookups
    for (const path of ['blob/README.md', 'tree/src', 'log?per_page=5', `changeset/${r.head}`]) {
      const before = await callsOn(n.url);
      const read = await u.get(`/api/v1/repos/${r.org}/${r.name}/${path}`);
      expect(read.status).toBe(200);
      expect((await callsOn(n.url)) - before).toBe(1);
    }
  });

  test('contents, raw files and archives read through both servers', async () => {
    const r = repos.get(vcs)!;
    for (const s of c.servers) {
      const u = s.admin.as(owner.token);
      const tree = await u.get(`/api/v1/repos/${r.org}/${r.name}/tree?rev=${r.head}`);
      expect(tree.status).toBe(200);
      const names = (tree.body.data as { name: string }[]).map((e) => e.name);
      expect(names).toEqual(expect.arrayContaining(['README.md', 'src']));
      const blob = await u.get(`/api/v1/repos/${r.org}/${r.name}/blob/README.md?rev=${r.head}`);
      expect(blob.body.data.content).toBe(`# ${vcs}\n`);
      const raw = await fetch(`${s.url}/api/v1/repos/${r.org}/${r.name}/raw/src/big.bin?rev=${r.head}`, {
        headers: { authorization: `Bearer ${owner.token}` },
      });
      expect(raw.status).toBe(200);
      const bytes = Buffer.from(await raw.arrayBuffer());
      expect(bytes.length).toBe(300 * 1024);
      expect(bytes.every((b) => b === 7)).toBe(true);
      const tgz = await fetch(`${s.url}/api/v1/repos/${r.org}/${r.name}/archive/${r.head}.tar.gz`, {
        headers: { authorization: `Bearer ${owner.token}` },
      });
      expect(tgz.status).toBe(200);
      const dir = await tempDir();
      try {
        await fs.writeFile(path.join(dir, 'a.tgz'), Buffer.from(await tgz.arrayBuffer()));
        const listing = await ok('tar', ['-tzf', 'a.tgz'], dir);
        expect(listing).toMatch(/\/README\.md$/m);
        expect(listing).toMatch(/\/src\/big\.bin$/m);
      } finally {
        await fs.rm(dir, { recursive: true, force: true });
      }
    }
  });

  test('a pull request merged through the other server, and a tag made by a release', async () => {
    const org = uniq('org');
    expect((await owner.client.post('/api/v1/orgs', { name: org })).status).toBe(201);
    const repo = await PrRepo.create(owner, org, vcs);
    {
      await repo.commitOn('feature', { 'feature.txt': 'f\n' }, 'feature work');
      const b = c.servers[1]!.admin.as(owner.token);
      const pr = await b.post(`${repo.api}/pulls`, { title: 'feature', source_ref: 'feature' });
      expect(pr.status).toBe(201);
      await settled(b, `${repo.api}/pulls/${pr.body.data.number}`);
      const m = await b.post(`${repo.api}/pulls/${pr.body.data.number}/merge`, {});
      expect(m.status).toBe(200);
      const a = c.servers[0]!.admin.as(owner.token);
      const merged = await a.get(`${repo.api}/pulls/${pr.body.data.number}`);
      expect(merged.body.data.status).toBe('merged');
      const file = await a.get(`${repo.api}/blob/feature.txt?rev=${MAINLINE[vcs]}`);
      expect(file.status).toBe(200);
      const rel = await a.post(`${repo.api}/releases`, { tag_name: 'v1.0', target_commitish: MAINLINE[vcs] });
      expect(rel.status).toBe(201);
      const tags = await b.get(`${repo.api}/tags`);
      expect((tags.body.data as { name: string }[]).map((t) => t.name)).toContain('v1.0');
    }
  });

  test('clone through one server, push through the other, clone again', async () => {
    const r = repos.get(vcs)!;
    const [a, b] = c.servers as [(typeof c.servers)[0], (typeof c.servers)[0]];
    const urlA = withCreds(`${a.url}/${r.org}/${r.name}`, owner.token);
    const urlB = withCreds(`${b.url}/${r.org}/${r.name}`, owner.token);
    const parent = await tempDir();
    try {
      const work = path.join(parent, 'w');
      if (vcs === 'git') {
        await ok('git', ['clone', '-q', urlA, work], parent);
        await writeFile(work, 'two.txt', 'two\n');
        await ok('git', ['add', '-A'], work);
        await ok('git', ['commit', '-q', '-m', 'two'], work);
        await ok('git', ['push', '-q', urlB, 'HEAD:main'], work);
        await ok('git', ['clone', '-q', urlA, path.join(parent, 'again')], parent);
        expect(await fs.readFile(path.join(parent, 'again', 'two.txt'), 'utf8')).toBe('two\n');
      } else if (vcs === 'hg') {
        await ok('hg', ['clone', '-q', urlA, work], parent);
        await writeFile(work, 'two.txt', 'two\n');
        await ok('hg', ['commit', '-q', '-A', '-m', 'two'], work);
        await ok('hg', ['push', '-q', urlB], work);
        await ok('hg', ['clone', '-q', urlA, path.join(parent, 'again')], parent);
        expect(await fs.readFile(path.join(parent, 'again', 'two.txt'), 'utf8')).toBe('two\n');
      } else {
        const file = path.join(parent, 'r.fossil');
        await ok('fossil', ['clone', '-B', `x:${owner.token}`, `${a.url}/${r.org}/${r.name}`, file], parent);
        await ok('fossil', ['open', '-f', '--workdir', work, file], parent);
        await ok('fossil', ['settings', 'autosync', 'off'], work);
        await writeFile(work, 'two.txt', 'two\n');
        await ok('fossil', ['add', 'two.txt'], work);
        await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', 'two'], work);
        await ok('fossil', ['push', '-B', `x:${owner.token}`, `${b.url}/${r.org}/${r.name}`], work);
        const again = path.join(parent, 'again.fossil');
        await ok('fossil', ['clone', '-B', `x:${owner.token}`, `${a.url}/${r.org}/${r.name}`, again], parent);
        expect(await ok('fossil', ['timeline', '-R', again, '-n', '5'], parent)).toContain('two');
      }
      // the push's event is recorded: the log through either server has it first
      for (const s of c.servers) {
        const log = await s.admin.as(owner.token).get(`/api/v1/repos/${r.org}/${r.name}/log?per_page=1`);
        expect(log.status).toBe(200);
        expect(log.body.data[0].subject).toBe('two');
      }
    } finally {
      await fs.rm(parent, { recursive: true, force: true });
    }
  });
});
