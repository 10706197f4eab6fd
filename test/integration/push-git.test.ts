import { describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, withOrgServer } from '../helpers/factories.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/server.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

const repoOf = (isPrivate = false) => newRepo(owner, org, { vcs: 'git', isPrivate });

describe('git over HTTP', () => {
  test('when a member pushes commits, then clone sees them and push/tag events are recorded', async () => {
    const repo = await repoOf();
    const work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    await writeFile(work, 'README.md', '# hello\n');
    await ok('git', ['add', '.'], work);
    await ok('git', ['commit', '-q', '-m', 'first commit\n\nwith a body'], work);
    await writeFile(work, 'src/a.txt', 'a\n');
    await ok('git', ['add', '.'], work);
    await ok('git', ['commit', '-q', '-m', 'second'], work);
    await ok('git', ['tag', '-a', 'v1.0', '-m', 'release'], work);
    const push = await sh('git', ['push', withCreds(repo.clone, owner.token), 'main', 'v1.0'], work);
    expect(push.code).toBe(0);

    const clone = await tempDir();
    await ok('git', ['clone', '-q', repo.clone, `${clone}/c`], clone);
    expect(await ok('git', ['log', '--format=%s'], `${clone}/c`)).toBe('second\nfirst commit\n');

    const head = (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => e.event_type)).toEqual(['push', 'tag']);
    const p = events[0]!.payload;
    expect(p).toMatchObject({
      ref: 'main',
      ref_type: 'branch',
      default: true,
      before: '',
      after: head,
      created: true,
      deleted: false,
      total_commits: 2,
      truncated: false,
    });
    expect(p.commits.map((c: { subject: string }) => c.subject)).toEqual(['second', 'first commit']);
    expect(p.head_commit).toEqual(p.commits[0]);
    expect(p.commits[1]).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{40}$/),
      short_id: p.commits[1].id.slice(0, 12),
      message: 'first commit\n\nwith a body',
      subject: 'first commit',
      author: { name: 'Ada Lovelace', email: 'ada@example.test', date: expect.stringMatching(/Z$/) },
      url: `${s.url}/api/v1/repos/${org}/${repo.name}/changeset/${p.commits[1].id}`,
    });
    expect(events[1]!.payload).toMatchObject({
      ref: 'v1.0',
      ref_type: 'tag',
      created: true,
      target: head,
      commit: { id: head, subject: 'second' },
    });
    expect(events[0]!.sender_id).toBe(owner.id);
  });

  test('when 60 commits are pushed, then the payload has the newest 50 and truncated', async () => {
    const repo = await repoOf();
    const work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    for (let i = 1; i <= 60; i++) await ok('git', ['commit', '-q', '--allow-empty', '-m', `c${i}`], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
    const [e] = await outboxEvents(s, repo.id);
    expect(e!.payload.total_commits).toBe(50);
    expect(e!.payload.truncated).toBe(true);
    expect(e!.payload.commits[0].subject).toBe('c60');
    expect(e!.payload.commits[49].subject).toBe('c11');

    // a second push reports only what it adds, with `before` the previous head
    const before = (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'c61'], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
    const events = await outboxEvents(s, repo.id);
    expect(events).toHaveLength(2);
    expect(events[1]!.payload).toMatchObject({ before, created: false, total_commits: 1, truncated: false });
  });

  test('when one push brings 51 commits to a new branch and one to main, then the branch lists its newest 50 and is truncated, main is not', async () => {
    const repo = await repoOf();
    const work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    for (let i = 1; i <= 50; i++) await ok('git', ['commit', '-q', '--allow-empty', '-m', `m${i}`], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
    const [first] = await outboxEvents(s, repo.id);
    // exactly 50: all listed, nothing left out
    expect(first!.payload).toMatchObject({ total_commits: 50, truncated: false });
    expect(first!.payload.commits[49].subject).toBe('m1');

    await ok('git', ['checkout', '-q', '-b', 'feat'], work);
    for (let i = 1; i <= 51; i++) await ok('git', ['commit', '-q', '--allow-empty', '-m', `f${i}`], work);
    await ok('git', ['checkout', '-q', 'main'], work);
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'm51'], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main', 'feat'], work);
    const events = (await outboxEvents(s, repo.id)).slice(1);
    const byRef = new Map(events.map((e) => [e.payload.ref as string, e.payload]));
    expect([...byRef.keys()].sort()).toEqual(['feat', 'main']);
    const feat = byRef.get('feat');
    expect(feat).toMatchObject({ created: true, before: '', total_commits: 50, truncated: true });
    expect(feat.commits[0].subject).toBe('f51');
    expect(feat.commits[49].subject).toBe('f2');
    expect(feat.head_commit).toEqual(feat.commits[0]);
    expect(byRef.get('main')).toMatchObject({ created: false, total_commits: 1, truncated: false });
    expect(byRef.get('main').commits.map((c: { subject: string }) => c.subject)).toEqual(['m51']);
  });

  test("when git probes before a large pack (a receive-pack body of one flush packet), then the probe is answered without waiting for the repository's push lock and records nothing", async () => {
    const repo = await repoOf();
    const other = new pg.Client({ connectionString: s.dbUrl });
    await other.connect();
    try {
      // the lock `RepoChanges` takes (src/repos/repository.ts: "push" and the repository id)
      await other.query('select pg_advisory_lock($1, $2)', [0x70757368, repo.id]);
      const r = await fetch(`${repo.clone}/git-receive-pack`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`x:${owner.token}`).toString('base64')}`,
          'content-type': 'application/x-git-receive-pack-request',
        },
        body: '0000',
        // held behind the lock, the probe would wait for the transfer timeout (10 minutes)
        signal: AbortSignal.timeout(30_000),
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/x-git-receive-pack-result');
      await r.arrayBuffer();
    } finally {
      await other.end();
    }
    expect(await outboxEvents(s, repo.id)).toEqual([]);
    // a real push (git sends the probe itself when the pack exceeds http.postBuffer) still works
    const work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    await writeFile(work, 'big.bin', randomBytes(256 * 1024).toString('hex'));
    await ok('git', ['add', '.'], work);
    await ok('git', ['commit', '-q', '-m', 'big'], work);
    await ok(
      'git',
      ['-c', 'http.postBuffer=65536', 'push', '-q', withCreds(repo.clone, owner.token), 'main'],
      work,
    );
    expect((await outboxEvents(s, repo.id)).map((e) => e.payload.ref)).toEqual(['main']);
  });

  test('when pushing anonymously, with a read-only token or as a non-member, then the push is refused', async () => {
    const repo = await repoOf();
    const work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'x'], work);
    const anon = await sh('git', ['push', repo.clone, 'main'], work);
    expect(anon.code).not.toBe(0);
    const reader = await s.newUser(undefined, { scopes: ['repo:read'] });
    await s.addMember(org, reader);
    const ro = await sh('git', ['push', withCreds(repo.clone, reader.token), 'main'], work);
    expect(ro.code).not.toBe(0);
    expect(ro.stderr).toContain('403');
    const outsider = await s.newUser();
    const out = await sh('git', ['push', withCreds(repo.clone, outsider.token), 'main'], work);
    expect(out.code).not.toBe(0);
    expect(await outboxEvents(s, repo.id)).toEqual([]);
  });

  test('when a repository is private, then anonymous clone is refused and a member token clones', async () => {
    const repo = await repoOf(true);
    const dir = await tempDir();
    const anon = await sh('git', ['clone', '-q', repo.clone, `${dir}/a`], dir);
    expect(anon.code).not.toBe(0);
    const outsider = await s.newUser();
    const hidden = await sh('git', ['clone', '-q', withCreds(repo.clone, outsider.token), `${dir}/b`], dir);
    expect(hidden.code).not.toBe(0);
    expect(hidden.stderr).toMatch(/not found|404/);
    const member = await sh(
      'git',
      ['clone', '-q', withCreds(`${repo.clone}.git`, owner.token), `${dir}/c`],
      dir,
    );
    expect(member.code).toBe(0);
  });

  test('a raw request without credentials to a private repository gets a Basic challenge', async () => {
    const repo = await repoOf(true);
    const r = await fetch(`${repo.clone}/info/refs?service=git-upload-pack`);
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toContain('Basic');
  });
});

describe('recorded ref state', () => {
  test('when refs moved on disk without being recorded, then the next push records that change first (sender unknown) and then its own', async () => {
    const repo = await repoOf();
    const work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'c1'], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
    const c1 = (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
    // a change that bypasses Triad (like a push whose server died before recording it)
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'c2'], work);
    await ok('git', ['push', '-q', `${s.dataDir}/repos/${repo.id}.git`, 'main'], work);
    const c2 = (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
    await ok('git', ['commit', '-q', '--allow-empty', '-m', 'c3'], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);
    const c3 = (await ok('git', ['rev-parse', 'HEAD'], work)).trim();

    const events = await outboxEvents(s, repo.id);
    expect(
      events.map((e) => [e.sender_id, e.payload.before, e.payload.after, e.payload.commits.length]),
    ).toEqual([
      [owner.id, '', c1, 1],
      [null, c1, c2, 1],
      [owner.id, c2, c3, 1],
    ]);
  });
});

describe('pushes from two server replicas', () => {
  test('when two replicas take pushes to one repository at once, then both land and each is recorded once', async () => {
    // a second server on the same database and repository volume, like a second replica
    const second = await startServer(
      loadConfig({
        DATABASE_URL: s.dbUrl,
        PORT: '0',
        HOST: '127.0.0.1',
        TRIAD_DATA_DIR: s.dataDir,
        TRIAD_EMBEDDED_AGENT: 'off',
        LOG_LEVEL: 'silent',
        TRIAD_LOG_REQUESTS: 'false',
      }),
    );
    try {
      const repo = await repoOf();
      const base = await tempDir();
      await ok('git', ['init', '-q', '-b', 'main', base], base);
      await ok('git', ['commit', '-q', '--allow-empty', '-m', 'root'], base);
      await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], base);
      const clones = await Promise.all(
        ['a', 'b', 'c', 'd'].map(async (name) => {
          const d = await tempDir();
          await ok('git', ['clone', '-q', repo.clone, `${d}/w`], d);
          await ok('git', ['checkout', '-q', '-b', `topic-${name}`], `${d}/w`);
          for (let i = 0; i < 5; i++)
            await ok('git', ['commit', '-q', '--allow-empty', '-m', `${name}${i}`], `${d}/w`);
          return { name, dir: `${d}/w` };
        }),
      );
      const urls = [repo.clone, repo.clone.replace(s.url, second.url)];
      const results = await Promise.all(
        clones.map((c, i) =>
          sh('git', ['push', '-q', withCreds(urls[i % 2]!, owner.token), `topic-${c.name}`], c.dir),
        ),
      );
      expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0]);
      const events = await outboxEvents(s, repo.id);
      const pushes = events.filter((e) => e.event_type === 'push').slice(1);
      expect(pushes.map((e) => e.payload.ref).sort()).toEqual(['topic-a', 'topic-b', 'topic-c', 'topic-d']);
      for (const e of pushes) {
        expect(e.payload).toMatchObject({ created: true, total_commits: 5 });
      }
      const check = await tempDir();
      await ok('git', ['clone', '-q', '--mirror', repo.clone, `${check}/m`], check);
      await ok('git', ['fsck', '--strict'], `${check}/m`);
    } finally {
      await second.close();
    }
  });
});
