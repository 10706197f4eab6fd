import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { ok } from '../helpers/vcs.ts';
import { TWO_STEPS, commitFiles, gitRepo, type GitRepo } from '../helpers/ci.ts';
import { outboxEvents } from '../helpers/outbox.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

const path = (r: GitRepo, rest = '') => `/api/v1/repos/${org}/${r.name}/pipelines${rest}`;

describe('pipeline triggers', () => {
  test('when a commit with a two-step pipeline file is pushed, then a pending pipeline with both steps exists', async () => {
    const repo = await gitRepo(s, owner, org);
    const sha = await commitFiles(repo, { '.pipeline.yml': TWO_STEPS }, 'add ci');
    await repo.push();
    const list = await owner.client.get(path(repo));
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 1, page: 1, per_page: 20 });
    const p = list.body.pipelines[0];
    expect(p).toMatchObject({
      number: 1,
      commit_node: sha,
      branch: 'main',
      tag: '',
      event: 'push',
      events: ['push'],
      status: 'pending',
      trigger_by: owner.id,
      trigger_user: { id: owner.id, username: owner.username },
      started_at: null,
      finished_at: null,
    });
    expect(p.steps).toBeUndefined();
    expect(p.error_message).toBeUndefined();
    const one = await s.anon.get(path(repo, '/1'));
    expect(one.status).toBe(200);
    expect(one.body.steps).toEqual([
      expect.objectContaining({
        number: 1,
        name: 'build',
        image: 'alpine:3',
        status: 'pending',
        exit_code: null,
      }),
      expect.objectContaining({ number: 2, name: 'test', status: 'pending' }),
    ]);
  });

  test('when the top-level `when` does not match, then no pipeline; a matching tag push creates one with the tag', async () => {
    const repo = await gitRepo(s, owner, org);
    const file = `when:\n  event: [tag]\nsteps:\n  - name: release\n    image: alpine\n    commands: [echo release]\n`;
    const sha = await commitFiles(repo, { '.pipeline.yml': file });
    await repo.push();
    expect((await s.anon.get(path(repo))).body.total).toBe(0);
    await ok('git', ['tag', 'v1.0'], repo.work);
    await repo.push('v1.0');
    const list = await s.anon.get(path(repo));
    expect(list.body.pipelines).toEqual([
      expect.objectContaining({ number: 1, event: 'tag', events: ['tag'], tag: 'v1.0', commit_node: sha }),
    ]);
  });

  test('when a step `when` does not match, then that step is created skipped', async () => {
    const repo = await gitRepo(s, owner, org);
    const file = `steps:\n  - name: always\n    image: alpine\n    commands: [echo a]\n  - name: on-tag\n    image: alpine\n    commands: [echo b]\n    when: {event: [tag]}\n  - name: on-release-branch\n    image: alpine\n    commands: [echo c]\n    when: {branch: ["release/*"]}\n`;
    await commitFiles(repo, { '.pipeline.yml': file });
    await repo.push();
    const p = await s.anon.get(path(repo, '/1'));
    expect(p.body.steps.map((x: any) => [x.name, x.status])).toEqual([
      ['always', 'pending'],
      ['on-tag', 'skipped'],
      ['on-release-branch', 'skipped'],
    ]);
    await ok('git', ['checkout', '-q', '-b', 'release/1.x'], repo.work);
    await commitFiles(repo, { x: '1' });
    await repo.push('release/1.x');
    const r = await s.anon.get(path(repo, '/2'));
    expect(r.body.branch).toBe('release/1.x');
    expect(r.body.steps.map((x: any) => x.status)).toEqual(['pending', 'skipped', 'pending']);
  });

  test('when the pipeline file is invalid, then an error pipeline says what and where', async () => {
    const repo = await gitRepo(s, owner, org);
    await commitFiles(repo, { '.pipeline.yml': 'steps:\n  - name: build\n    commands: [make]\n' });
    await repo.push();
    const p = await s.anon.get(path(repo, '/1'));
    expect(p.body.status).toBe('error');
    expect(p.body.steps).toEqual([]);
    expect(p.body.error_message).toMatch(/^\.pipeline\.yml line 2 \(steps\[0\]\.image\): /);
    await commitFiles(repo, { '.pipeline.yml': 'steps: [unclosed\n' });
    await repo.push();
    const bad = await s.anon.get(path(repo, '/2'));
    expect(bad.body.status).toBe('error');
    expect(bad.body.error_message).toMatch(/^\.pipeline\.yml line \d+: /);
  });

  test('when a push and a tag reach the same commit, then one pipeline lists both events', async () => {
    const repo = await gitRepo(s, owner, org);
    const sha = await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
    await ok('git', ['tag', 'v2'], repo.work);
    await repo.push('main', 'v2');
    const list = await s.anon.get(path(repo));
    expect(list.body.total).toBe(1);
    expect(list.body.pipelines[0]).toMatchObject({
      commit_node: sha,
      event: 'push',
      events: ['push', 'tag'],
      tag: 'v2',
    });
  });

  test('when one push brings tags on several commits, then each commit gets the pipeline of its own file (none without one)', async () => {
    const repo = await gitRepo(s, owner, org);
    const step = (name: string) =>
      `steps:\n  - name: ${name}\n    image: alpine\n    commands: [echo ${name}]\n`;
    const a = await commitFiles(repo, { '.pipeline.yml': step('first') });
    await ok('git', ['tag', 'ta'], repo.work);
    await ok('git', ['rm', '-q', '.pipeline.yml'], repo.work);
    const b = await commitFiles(repo, {}, 'no pipeline file');
    await ok('git', ['tag', 'tb'], repo.work);
    const c = await commitFiles(repo, { '.pipeline.yml': step('third') });
    await ok('git', ['tag', 'tc'], repo.work);
    await repo.push('main', 'ta', 'tb', 'tc');
    const list = await s.anon.get(path(repo));
    expect(list.body.total).toBe(2);
    const byCommit = new Map(
      list.body.pipelines.map((p: { commit_node: string; number: number }) => [p.commit_node, p]),
    );
    expect(byCommit.has(b)).toBe(false);
    expect(byCommit.get(a)).toMatchObject({ events: ['tag'], tag: 'ta' });
    expect(byCommit.get(c)).toMatchObject({ events: ['push', 'tag'], tag: 'tc', branch: 'main' });
    for (const [commit, name] of [
      [a, 'first'],
      [c, 'third'],
    ] as const) {
      const one = await s.anon.get(path(repo, `/${(byCommit.get(commit) as { number: number }).number}`));
      expect(one.body.steps.map((x: { name: string }) => x.name)).toEqual([name]);
    }
  });

  test('when a tag joins a pending pipeline, then its steps for tags are no longer skipped', async () => {
    const repo = await gitRepo(s, owner, org);
    const file = `steps:\n  - name: always\n    image: alpine\n    commands: [echo a]\n  - name: on-tag\n    image: alpine\n    commands: [echo b]\n    when: {event: [tag]}\n  - name: on-pr\n    image: alpine\n    commands: [echo c]\n    when: {event: [pull_request]}\n`;
    await commitFiles(repo, { '.pipeline.yml': file });
    await repo.push();
    const before = await s.anon.get(path(repo, '/1'));
    expect(before.body.steps.map((x: any) => x.status)).toEqual(['pending', 'skipped', 'skipped']);
    await ok('git', ['tag', 'v1'], repo.work);
    await repo.push('v1');
    const after = await s.anon.get(path(repo, '/1'));
    expect(after.body).toMatchObject({ status: 'pending', events: ['push', 'tag'], tag: 'v1' });
    expect(after.body.steps.map((x: any) => x.status)).toEqual(['pending', 'pending', 'skipped']);
    expect((await s.anon.get(path(repo))).body.total).toBe(1);
  });

  test('when a commit has no pipeline file, then no pipeline is created', async () => {
    const repo = await gitRepo(s, owner, org);
    await commitFiles(repo, { README: 'x' });
    await repo.push();
    expect((await s.anon.get(path(repo))).body).toEqual({ total: 0, page: 1, per_page: 20, pipelines: [] });
  });
});

describe('pipeline list', () => {
  test('per_page is clamped to 50, status filters, and unknown numbers are 404', async () => {
    const repo = await gitRepo(s, owner, org);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
    await repo.push();
    await commitFiles(repo, { '.pipeline.yml': 'steps: [' });
    await repo.push();
    const all = await s.anon.get(path(repo, '?per_page=500'));
    expect(all.body).toMatchObject({ total: 2, page: 1, per_page: 50 });
    expect(all.body.pipelines.map((p: any) => p.number)).toEqual([2, 1]);
    const errors = await s.anon.get(path(repo, '?status=error'));
    expect(errors.body.pipelines.map((p: any) => p.number)).toEqual([2]);
    const pending = await s.anon.get(path(repo, '?status=pending&per_page=1&page=1'));
    expect(pending.body).toMatchObject({
      total: 1,
      per_page: 1,
      pipelines: [expect.objectContaining({ number: 1 })],
    });
    expect((await s.anon.get(path(repo, '?status=bogus'))).status).toBe(400);
    expect((await s.anon.get(path(repo, '/3'))).status).toBe(404);
    expect((await s.anon.get(path(repo, '/abc'))).status).toBe(404);
  });

  test('a private repository hides its pipelines from outsiders (404)', async () => {
    const repo = await gitRepo(s, owner, org, true);
    await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
    await repo.push();
    expect((await s.anon.get(path(repo))).status).toBe(404);
    const outsider = await s.newUser();
    expect((await outsider.client.get(path(repo, '/1'))).status).toBe(404);
    expect((await owner.client.get(path(repo, '/1'))).status).toBe(200);
  });
});

describe('pipeline triggers that fail', () => {
  test('when the pipeline file cannot be stored, the push events are still recorded', async () => {
    const repo = await gitRepo(s, owner, org);
    await commitFiles(repo, {
      '.pipeline.yml': 'steps:\n  - name: "a\\0b"\n    image: alpine\n    commands: [x]\n',
    });
    await repo.push();
    const events = await outboxEvents(s, repo.id);
    // the push, and the pipeline's own commit status (an `error`: the file could not be used)
    expect(events.map((e) => e.event_type)).toEqual(['push', 'status']);
    expect(events[1]!.payload.status).toMatchObject({ context: 'triad/pipeline', state: 'error' });
    const p = await s.anon.get(path(repo, '/1'));
    expect(p.body).toMatchObject({
      status: 'error',
      error_message: '.pipeline.yml: NUL characters are not allowed',
    });
  });
});
