/**
 * One scenario run in both API variants (docs/api-variants.md), each on a server whose default is
 * that variant, checking every row of the spec's Versioning table: scopes, the token endpoints'
 * scope, changeset identifiers, issues, pull request create, pipelines, and webhooks with their
 * deliveries to a real receiver. The web interface answers in the current variant on both. Every
 * answer is checked against the OpenAPI document of the variant it names (validate-responses.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { expectError, mintedClient, newRepo, withOrgServer } from '../helpers/factories.ts';
import { newAgent, TWO_STEPS } from '../helpers/ci.ts';
import { MAINLINE, PrRepo } from '../helpers/pulls.ts';
import { Receiver, type Received } from '../helpers/receiver.ts';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { checkedEarlierResponses } from '../helpers/validate-responses.ts';
import { ok, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

const VARIANTS = ['current', 'earlier'] as const;
const CURRENT = { 'X-Svc-Api-Variant': 'current' };
const SECRET = 'variant-secret';

describe.each(VARIANTS)('the %s variant', (variant) => {
  const earlier = variant === 'earlier';
  let s: TestServer;
  let owner: TestUser;
  let member: TestUser;
  let org: string;
  let receiver: Receiver;
  withOrgServer(
    {
      TRIAD_API_VARIANT: variant,
      TRIAD_WEBHOOK_ALLOWED_HOSTS: '*',
      TRIAD_WEBHOOK_RETRY_SCHEDULE: '300ms,300ms',
      TRIAD_WEBHOOK_TIMEOUT: '10s',
    },
    (w) => ({ s, owner, org } = w),
  );
  beforeAll(async () => {
    member = await s.newUser();
    await s.addMember(org, member);
    receiver = await Receiver.start(SECRET);
  });
  afterAll(async () => {
    await receiver.close();
  });

  /** A token of the owner with these scopes (names of this variant, else `headers` says which). */
  const token = (scopes: string[], headers?: Record<string, string>) =>
    headers === undefined
      ? mintedClient(s, owner, { scopes })
      : owner.client
          .post('/api/v1/user/tokens', { name: uniq('t'), scopes }, headers)
          .then((r) => s.anon.as(r.body.data.token as string));

  test('every answer names the variant in force: the server default', async () => {
    const r = await owner.client.get('/api/v1/user');
    expect(r.headers.get('x-svc-api-variant')).toBe(variant);
    expect((await s.anon.get(`/api/v1/orgs/${org}`)).headers.get('x-svc-api-variant')).toBe(variant);
  });

  test('Scopes: the variant’s names; the earlier names stand for the current ones', async () => {
    const repo = await newRepo(owner, org, { vcs: 'git', isPrivate: true });
    const issues = `${repo.api}/issues`;
    if (earlier) {
      expectError(
        await owner.client.post('/api/v1/user/tokens', { name: uniq('t'), scopes: ['issues:write'] }),
        400,
        'validation_failed',
      );
      const reader = await token(['read']);
      expect((await reader.get(issues)).status).toBe(200);
      expectError(await reader.post(issues, { title: 'no' }), 403, 'forbidden');
      const writer = await token(['read', 'write']);
      expect((await writer.post(issues, { title: 'with write' })).status).toBe(201);
      // `write` is not `admin`: deleting a repository needs admin in both variants
      expectError(await writer.delete(repo.api), 403, 'forbidden');
    } else {
      const reader = await token(['issues:read', 'repo:read']);
      expect((await reader.get(issues)).status).toBe(200);
      expectError(await reader.post(issues, { title: 'no' }), 403, 'forbidden');
      const writer = await token(['issues:write', 'repo:read']);
      expect((await writer.post(issues, { title: 'with issues:write' })).status).toBe(201);
      // the earlier names are still taken here, with the same meaning
      const coarse = await token(['read', 'write']);
      expect((await coarse.post(issues, { title: 'with write' })).status).toBe(201);
    }
    const admin = await token(['admin']);
    expect((await admin.delete(repo.api)).status).toBe(204);
  });

  test('Token endpoints scope: any valid token (current), read (earlier)', async () => {
    const narrow = await token(['ci:write'], CURRENT);
    for (const path of ['/api/v1/user', '/api/v1/user/tokens']) {
      const r = await narrow.get(path);
      if (earlier) expectError(r, 403, 'forbidden');
      else expect(r.status).toBe(200);
    }
    const reading = await token(earlier ? ['read'] : ['repo:read']);
    expect((await reading.get('/api/v1/user/tokens')).status).toBe(200);
  });

  test('Changeset identifiers: node, short_node, rev (earlier) or id, short_id (current), in every kind', async () => {
    for (const kind of ['git', 'hg', 'fossil'] as const) {
      const repo = await PrRepo.create(owner, org, kind);
      await repo.commitOn(MAINLINE[kind], { 'b.txt': 'b\n' }, 'second');
      const tip = await s.anon.get(`${repo.api}/changeset/tip`);
      expect(tip.status).toBe(200);
      const log = await s.anon.get(`${repo.api}/log`);
      for (const c of [tip.body.data, ...log.body.data]) {
        if (earlier) {
          expect(c).toEqual(expect.objectContaining({ node: expect.any(String), rev: expect.any(Number) }));
          expect(c.node.startsWith(c.short_node)).toBe(true);
          expect(c).not.toHaveProperty('id');
          expect(c).not.toHaveProperty('short_id');
        } else {
          expect(c.id.startsWith(c.short_id)).toBe(true);
          expect(c).not.toHaveProperty('node');
          expect(c).not.toHaveProperty('rev');
        }
      }
      expect(tip.body.data.subject).toBe('second');
      if (earlier) expect(tip.body.data.rev).toBe(log.body.data[0].rev);
    }
  });

  describe('Issue', () => {
    let api: string;
    let repoName: string;
    const issue = async (n: number) => (await s.anon.get(`${api}/issues/${n}`)).body.data;

    beforeAll(async () => {
      const repo = await newRepo(owner, org, { vcs: 'git' });
      api = repo.api;
      repoName = repo.name;
      const label = await owner.client.post(`${api}/labels`, { name: 'bug', color: '#cc0000' });
      expect(label.status).toBe(201);
      expect(label.body.data.scope === undefined).toBe(earlier);
    });

    test('create: severity, labels and assignees only in the current variant', async () => {
      const full = {
        title: 'full',
        severity: 'high',
        labels: ['bug'],
        assignees: [{ user_id: member.id }],
      };
      const r = await owner.client.post(`${api}/issues`, full);
      if (earlier) {
        expectError(r, 400, 'validation_failed');
        expect(r.body.error.message).toMatch(/severity.*not a field of the earlier API variant|severity/);
        expect(r.body.error.message).toMatch(/X-Svc-Api-Variant: current/);
      } else {
        expect(r.status).toBe(201);
        expect(r.body.data).toMatchObject({ severity: 'high', state: 'open' });
        expect(r.body.data.labels).toEqual([expect.objectContaining({ name: 'bug', scope: 'repo' })]);
        expect(r.body.data.assignees).toEqual([expect.objectContaining({ id: member.id })]);
      }
      const plain = await owner.client.post(`${api}/issues`, { title: 'plain', body: 'text' });
      expect(plain.status).toBe(201);
      expect(plain.body.data.state).toBe('new');
      if (earlier) {
        for (const field of ['severity', 'assignees', 'labels'])
          expect(plain.body.data).not.toHaveProperty(field);
      } else {
        expect(plain.body.data).toMatchObject({ severity: 'none', labels: [], assignees: [] });
      }
    });

    test('labels: without scope and only when assigned (earlier), always (current); the catalog alike', async () => {
      const made = await owner.client.post(`${api}/issues`, { title: 'to label' });
      const n = made.body.data.number as number;
      // labelled through the current variant, read in this one
      expect((await owner.client.post(`${api}/issues/${n}/labels`, { name: 'bug' }, CURRENT)).status).toBe(
        200,
      );
      const labelled = await issue(n);
      if (earlier)
        expect(labelled.labels).toEqual([{ id: expect.any(Number), name: 'bug', color: '#cc0000' }]);
      else expect(labelled.labels).toEqual([expect.objectContaining({ name: 'bug', scope: 'repo' })]);
      const catalog = await s.anon.get(`${api}/issues/labels`);
      const bug = catalog.body.data.find((l: { name: string }) => l.name === 'bug');
      expect(bug.scope === undefined).toBe(earlier);
      expect(bug.description).toBe('');
    });

    test('state: auto-open on comment or assignee (current); triage by the state update (earlier)', async () => {
      const made = await owner.client.post(`${api}/issues`, { title: 'triage me' });
      const n = made.body.data.number as number;
      expect((await owner.client.post(`${api}/issues/${n}/comments`, { body: 'first' })).status).toBe(201);
      expect((await issue(n)).state).toBe(earlier ? 'new' : 'open');
      const other = (await owner.client.post(`${api}/issues`, { title: 'assign me' })).body.data
        .number as number;
      const assigned = await owner.client.post(`${api}/issues/${other}/assignees`, { user_id: member.id });
      if (earlier) expectError(assigned, 404, 'not_found');
      else expect(assigned.body.data.state).toBe('open');
      const triaged = await owner.client.patch(`${api}/issues/${n}`, { state: 'open' });
      expect(triaged.status).toBe(200);
      expect(triaged.body.data.state).toBe('open');
    });

    test('the label and assignee endpoints exist only in the current variant', async () => {
      const n = (await owner.client.post(`${api}/issues`, { title: 'endpoints' })).body.data.number as number;
      const calls = [
        () => owner.client.post(`${api}/issues/${n}/labels`, { name: 'bug' }),
        () => owner.client.delete(`${api}/issues/${n}/labels/bug`),
        () => owner.client.post(`${api}/issues/${n}/assignees`, { user_id: member.id }),
        () => owner.client.delete(`${api}/issues/${n}/assignees/${member.id}`),
      ];
      for (const call of calls) {
        const r = await call();
        if (earlier) {
          expectError(r, 404, 'not_found');
          expect(r.body.error.message).toMatch(/earlier API variant/);
        } else expect(r.status).toBe(200);
      }
    });

    test('list filters beyond the state only in the current variant', async () => {
      const high = await owner.client.post(`${api}/issues`, { title: 'severe', severity: 'high' }, CURRENT);
      expect(high.status).toBe(201);
      const filtered = await s.anon.get(`${api}/issues?state=new&severity=high`);
      expect(filtered.status).toBe(200);
      const titles = filtered.body.data.map((i: { title: string }) => i.title);
      if (earlier) expect(titles.length).toBeGreaterThan(1);
      else expect(titles).toEqual(['severe']);
      const all = await s.anon.get(`${api}/issues?state=all`);
      if (earlier) expectError(all, 400, 'validation_failed');
      else expect(all.status).toBe(200);
    });

    test('search answers the variant’s issue form', async () => {
      const r = await s.anon.get(`${api}/search/issues?q=severe`);
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual([expect.objectContaining({ kind: 'issue', title: 'severe' })]);
      expect(r.body.data[0].severity === undefined).toBe(earlier);
    });

    test('the web interface answers in the current variant', async () => {
      const n = (
        await owner.client.post(`${api}/issues`, { title: 'on the web', severity: 'critical' }, CURRENT)
      ).body.data.number as number;
      const page = await fetch(`${s.url}/${org}/${repoName}/-/issues/${n}`);
      expect(page.status).toBe(200);
      expect(page.headers.has('x-svc-api-variant')).toBe(false);
      expect(await page.text()).toContain('Severity: critical');
    });
  });

  test('Pull request create: source_ref, target_ref, ref_type (current) or source_bookmark, target_branch (earlier)', async () => {
    const git = await PrRepo.create(owner, org, 'git');
    await git.commitOn('feature', { 'f.txt': 'f\n' }, 'feature');
    const hg = await PrRepo.create(owner, org, 'hg');
    await hg.commitOn('feat', { 'f.txt': 'f\n' }, 'feat');
    const open = (repo: PrRepo, source: string) =>
      owner.client.post(
        `${repo.api}/pulls`,
        earlier ? { title: 'pr', source_bookmark: source } : { title: 'pr', source_ref: source },
      );
    const wrong = earlier
      ? { title: 'pr', source_ref: 'feature' }
      : { title: 'pr', source_bookmark: 'feature' };
    expectError(await owner.client.post(`${git.api}/pulls`, wrong), 400, 'validation_failed');
    const g = await open(git, 'feature');
    const h = await open(hg, 'feat');
    expect(g.status).toBe(201);
    expect(h.status).toBe(201);
    if (earlier) {
      expect(g.body.data).toMatchObject({ source_bookmark: 'feature', target_branch: 'main' });
      expect(h.body.data).toMatchObject({ source_bookmark: 'feat', target_branch: 'default' });
      for (const pr of [g.body.data, h.body.data]) {
        for (const field of ['source_ref', 'target_ref', 'ref_type']) expect(pr).not.toHaveProperty(field);
      }
    } else {
      expect(g.body.data).toMatchObject({ source_ref: 'feature', target_ref: 'main', ref_type: 'branch' });
      expect(h.body.data).toMatchObject({ source_ref: 'feat', target_ref: '@', ref_type: 'bookmark' });
    }
    // the merge goes into the target branch
    const merged = await owner.client.post(`${git.api}/pulls/${g.body.data.number}/merge`);
    expect(merged.status).toBe(200);
    expect(merged.body.data.status).toBe('merged');
    const main = (await s.anon.get(`${git.api}/changeset/main`)).body.data;
    expect(earlier ? main.node : main.id).toBe(merged.body.data.merge_commit);
    const list = await s.anon.get(`${git.api}/pulls?status=merged`);
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0].ref_type === undefined).toBe(earlier);
    expect(list.body.data[0][earlier ? 'target_branch' : 'target_ref']).toBe('main');
  });

  test('Pipeline: tag, events and error_message and the step log read only in the current variant', async () => {
    const repo = await newRepo(owner, org, { vcs: 'git' });
    const work = await tempDir();
    await ok('git', ['init', '-q', '-b', 'main', work], work);
    await writeFile(work, '.pipeline.yml', TWO_STEPS);
    await ok('git', ['add', '.'], work);
    await ok('git', ['commit', '-q', '-m', 'ci'], work);
    await ok('git', ['tag', 'v1'], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main', 'v1'], work);
    await writeFile(work, '.pipeline.yml', 'steps:\n  - name: build\n    commands: [make]\n');
    await ok('git', ['commit', '-q', '-am', 'broken ci'], work);
    await ok('git', ['push', '-q', withCreds(repo.clone, owner.token), 'main'], work);

    const list = await s.anon.get(`${repo.api}/pipelines`);
    expect(list.body.total).toBe(2);
    const [broken, tagged] = list.body.pipelines;
    const one = (await s.anon.get(`${repo.api}/pipelines/${tagged.number}`)).body;
    if (earlier) {
      for (const p of [broken, tagged, one]) {
        for (const field of ['tag', 'events', 'error_message']) expect(p).not.toHaveProperty(field);
      }
      expect(broken.status).toBe('error');
    } else {
      expect(tagged).toMatchObject({ tag: 'v1', events: ['push', 'tag'] });
      expect(one).toMatchObject({ tag: 'v1', events: ['push', 'tag'] });
      expect(broken).toMatchObject({
        status: 'error',
        tag: '',
        error_message: expect.stringMatching(/image/),
      });
    }
    // a step with a log, run by an agent speaking the protocol
    const agent = await newAgent(s);
    const job = (await agent.post('/api/v1/ci/poll')).body;
    expect(job.pipeline_id).toBe(tagged.id);
    const step = job.steps[0].id as number;
    expect((await agent.put(`/api/v1/ci/steps/${step}/status`, { status: 'running' })).status).toBe(200);
    const text = 'building\n';
    expect(
      (await agent.post(`/api/v1/ci/steps/${step}/log`, text, { 'content-type': 'text/plain' })).status,
    ).toBe(200);
    const logPath = `${repo.api}/pipelines/${tagged.number}/steps/1/log`;
    const log = await owner.client.get(logPath);
    if (earlier) {
      expectError(log, 404, 'not_found');
      expect(log.body.error.message).toMatch(/earlier API variant/);
      expect((await owner.client.get(logPath, CURRENT)).text).toBe(text);
    } else {
      expect(log.status).toBe(200);
      expect(log.text).toBe(text);
    }
    const cancelled = await owner.client.post(`${repo.api}/pipelines/${tagged.number}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe('cancelled');
    expect(cancelled.body.events === undefined).toBe(earlier);
  });

  test('Webhook scope and events: write and push/issue/pull_request (earlier), admin and the event list (current)', async () => {
    const repo = await PrRepo.create(owner, org, 'git');
    const hooks = `${repo.api}/webhooks`;
    const url = receiver.url(`/${variant}`);
    const writer = await token(earlier ? ['write'] : ['repo:write', 'issues:write', 'pulls:write']);
    const names = earlier
      ? ['push', 'issue', 'pull_request']
      : ['push', 'tag', 'issue.opened', 'issue.commented', 'pull_request.opened'];
    const other = earlier ? ['issue.opened'] : ['issue'];
    const manager = earlier ? writer : owner.client;
    if (!earlier) expectError(await writer.post(hooks, { url, events: names }), 403, 'forbidden');
    const reader = await token(earlier ? ['read'] : ['repo:read']);
    expectError(await reader.post(hooks, { url, events: names }), 403, 'forbidden');
    expectError(await manager.post(hooks, { url, events: other }), 400, 'validation_failed');
    const made = await manager.post(hooks, { url, secret: SECRET, events: names });
    expect(made.status).toBe(201);
    expect(made.body.data).toMatchObject({ api_variant: variant, events: names });

    // what happens: a push with a tag, an issue and its comment, a pull request
    await repo.commitOn('main', { 'c.txt': 'c\n' }, 'change');
    await ok('git', ['tag', 'v9'], repo.w.dir);
    await ok('git', ['push', '-q', withCreds(repo.w.url, repo.w.token), 'v9'], repo.w.dir);
    const n = (await owner.client.post(`${repo.api}/issues`, { title: 'hooked' })).body.data.number as number;
    await owner.client.post(`${repo.api}/issues/${n}/comments`, { body: 'a comment' });
    await repo.commitOn('topic', { 't.txt': 't\n' }, 'topic');
    const pr = earlier
      ? { title: 'hooked pr', source_bookmark: 'topic' }
      : { title: 'hooked pr', source_ref: 'topic' };
    expect((await owner.client.post(`${repo.api}/pulls`, pr)).status).toBe(201);

    const mine = (r: Received) => r.path === `/${variant}`;
    // push (main) + the tag + push (topic) + issue opened + commented + pull request opened
    const got = await receiver.waitFor(6, mine);
    for (const r of got) {
      expect(r.svcValid).toBe(true);
      expect(r.standardValid).toBe(true);
      expect(r.body.event).toBe(r.event);
      expect(Object.keys(r.body).sort()).toEqual(
        ['delivery_id', 'event', 'payload', 'repository', 'sender', 'timestamp'].sort(),
      );
    }
    const events = got.map((r) => r.event).sort();
    const issueEvents = got.filter((r) => r.body.payload.issue !== undefined);
    const pullEvents = got.filter((r) => r.body.payload.pull_request !== undefined);
    const tagEvent = got.find((r) => r.body.payload.ref_type === 'tag');
    if (earlier) {
      expect(events).toEqual(['issue', 'issue', 'pull_request', 'push', 'push', 'push']);
      expect(tagEvent?.event).toBe('push');
      for (const r of issueEvents) expect(r.body.payload.issue).not.toHaveProperty('severity');
      expect(pullEvents[0]!.body.payload.pull_request).toMatchObject({ source_bookmark: 'topic' });
      expect(pullEvents[0]!.body.payload.pull_request).not.toHaveProperty('ref_type');
    } else {
      expect(events).toEqual([
        'issue.commented',
        'issue.opened',
        'pull_request.opened',
        'push',
        'push',
        'tag',
      ]);
      for (const r of issueEvents) expect(r.body.payload.issue).toHaveProperty('severity', 'none');
      expect(pullEvents[0]!.body.payload.pull_request).toMatchObject({
        source_ref: 'topic',
        ref_type: 'branch',
      });
    }
    expect(new Set(issueEvents.map((r) => r.body.payload.action))).toEqual(new Set(['opened', 'commented']));
    // the history records what was sent (once each attempt is written down)
    const recorded = async () => {
      const history = await manager.get(`${hooks}/${made.body.data.id}/deliveries`);
      return (history.body.data as { event_type: string }[]).map((d) => d.event_type).sort();
    };
    let sent = await recorded();
    for (let i = 0; i < 100 && sent.length < events.length; i += 1) {
      await new Promise((r) => setTimeout(r, 100));
      sent = await recorded();
    }
    expect(sent).toEqual(events);
  });

  afterAll(() => {
    if (earlier) expect(checkedEarlierResponses()).toBeGreaterThan(0);
  });
});

describe('webhooks of both variants on one server', () => {
  let owner: TestUser;
  let org: string;
  let receiver: Receiver;
  withOrgServer({ TRIAD_WEBHOOK_ALLOWED_HOSTS: '*' }, (w) => ({ owner, org } = w));
  beforeAll(async () => {
    receiver = await Receiver.start(SECRET);
  });
  afterAll(async () => {
    await receiver.close();
  });

  test('one event reaches each webhook under its own variant’s name, and a webhook keeps its variant', async () => {
    const repo = await newRepo(owner, org, { vcs: 'git' });
    const hooks = `${repo.api}/webhooks`;
    const asEarlier = { 'X-Svc-Api-Variant': 'earlier' };
    const old = await owner.client.post(
      hooks,
      { url: receiver.url('/earlier'), secret: SECRET, events: ['issue'] },
      asEarlier,
    );
    expect(old.status).toBe(201);
    expect(old.body.data.api_variant).toBe('earlier');
    const now = await owner.client.post(hooks, {
      url: receiver.url('/current'),
      secret: SECRET,
      events: ['issue.opened'],
    });
    expect(now.body.data.api_variant).toBe('current');
    // changed through the current variant, the earlier webhook keeps its variant and its names
    const id = old.body.data.id as number;
    expectError(
      await owner.client.patch(`${hooks}/${id}`, { events: ['issue.opened'] }),
      400,
      'validation_failed',
    );
    const kept = await owner.client.patch(`${hooks}/${id}`, { events: ['issue', 'push'] });
    expect(kept.body.data).toMatchObject({ api_variant: 'earlier', events: ['issue', 'push'] });

    expect((await owner.client.post(`${repo.api}/issues`, { title: 'both', severity: 'low' })).status).toBe(
      201,
    );
    const [e] = await receiver.waitFor(1, (r) => r.path === '/earlier');
    const [c] = await receiver.waitFor(1, (r) => r.path === '/current');
    expect([e!.event, e!.body.event]).toEqual(['issue', 'issue']);
    expect([c!.event, c!.body.event]).toEqual(['issue.opened', 'issue.opened']);
    expect(e!.body.payload.action).toBe('opened');
    expect(e!.body.payload.issue).not.toHaveProperty('severity');
    expect(c!.body.payload.issue.severity).toBe('low');
    expect(e!.svcValid && c!.svcValid && e!.standardValid && c!.standardValid).toBe(true);
    // the same envelope fields, the same event
    expect(Object.keys(e!.body).sort()).toEqual(Object.keys(c!.body).sort());
    expect(e!.body.payload.issue.number).toBe(c!.body.payload.issue.number);
  });
});
