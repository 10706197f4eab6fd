import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { newRepo } from '../helpers/factories.ts';

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let author: TestUser;
let outsider: TestUser;
let org: string;

const repoOf = (isPrivate?: boolean) => newRepo(owner, org, { isPrivate });

async function label(repoPath: string, name: string, color = '#aa0000') {
  const r = await owner.client.post(`${repoPath}/labels`, { name, color });
  if (r.status !== 201) throw new Error(`label: ${r.status} ${r.text}`);
  return r.body.data;
}

beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  member = await s.newUser();
  author = await s.newUser();
  outsider = await s.newUser();
  org = await s.newOrg(owner);
  await s.addMember(org, member);
  await s.addMember(org, author);
});
afterAll(async () => {
  await s.close();
});

describe('README acceptance path', () => {
  test('create with a label and an assignee -> open with both; a non-author member cannot close; the author closes; state=closed lists it', async () => {
    const repo = await repoOf();
    await label(repo.api, 'bug');
    const created = await author.client.post(`${repo.api}/issues`, {
      title: 'Crash on start',
      body: 'It crashes.',
      labels: ['bug'],
      assignees: [{ user_id: member.id }],
    });
    expect(created.status).toBe(201);
    const issue = created.body.data;
    expect(issue.state).toBe('open');
    expect(issue.labels).toEqual([{ id: expect.any(Number), name: 'bug', color: '#aa0000', scope: 'repo' }]);
    expect(issue.assignees).toEqual([
      {
        id: member.id,
        username: member.username,
        display_name: `${member.username} Display`,
        avatar_url: '',
      },
    ]);

    const denied = await member.client.patch(`${repo.api}/issues/${issue.number}`, { state: 'closed' });
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe('forbidden');

    const closed = await author.client.patch(`${repo.api}/issues/${issue.number}`, { state: 'closed' });
    expect(closed.status).toBe(200);
    expect(closed.body.data.state).toBe('closed');

    const list = await s.anon.get(`${repo.api}/issues?state=closed`);
    expect(list.status).toBe(200);
    expect(list.body.data.map((i: any) => i.number)).toEqual([issue.number]);
    const open = await s.anon.get(`${repo.api}/issues`);
    expect(open.body.data).toEqual([]);
  });
});

describe('issue shape', () => {
  test('create answers 201 with the enriched issue; arrays always present; severity defaults to none', async () => {
    const repo = await repoOf();
    const r = await author.client.post(`${repo.api}/issues`, { title: 'Plain' });
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({
      id: expect.any(Number),
      number: 1,
      title: 'Plain',
      body: '',
      state: 'new',
      severity: 'none',
      author: {
        id: author.id,
        username: author.username,
        display_name: `${author.username} Display`,
        avatar_url: '',
      },
      labels: [],
      assignees: [],
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
    });
    expect(r.body.data.comments).toBeUndefined();
  });

  test('detail has no comments key without comments, and the comments after the first one', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'Talk' });
    const bare = await s.anon.get(`${repo.api}/issues/1`);
    expect(bare.status).toBe(200);
    expect('comments' in bare.body.data).toBe(false);
    const c = await member.client.post(`${repo.api}/issues/1/comments`, { body: 'me too' });
    expect(c.status).toBe(201);
    expect(c.body.data).toEqual({
      id: expect.any(Number),
      body: 'me too',
      author: expect.objectContaining({ id: member.id, username: member.username }),
      created_at: expect.any(String),
    });
    const detail = await s.anon.get(`${repo.api}/issues/1`);
    expect(detail.body.data.comments).toEqual([c.body.data]);
    const list = await s.anon.get(`${repo.api}/issues?state=all`);
    expect(list.body.data[0].comments).toBeUndefined();
  });

  test('unknown or non-numeric issue numbers answer 404; /issues/labels is the catalog, not an issue', async () => {
    const repo = await repoOf();
    for (const n of ['99', 'abc', '0', '99999999999999']) {
      const r = await s.anon.get(`${repo.api}/issues/${n}`);
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe('not_found');
    }
    const catalog = await s.anon.get(`${repo.api}/issues/labels`);
    expect(catalog.status).toBe(200);
    expect(Array.isArray(catalog.body.data)).toBe(true);
  });

  test('update answers data: issue and changes title, body and severity (case-insensitive)', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'Old', severity: 'HIGH' });
    const got = await s.anon.get(`${repo.api}/issues/1`);
    expect(got.body.data.severity).toBe('high');
    const r = await author.client.patch(`${repo.api}/issues/1`, {
      title: 'New',
      body: 'details',
      severity: 'Critical',
    });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ number: 1, title: 'New', body: 'details', severity: 'critical' });
    expect(r.body.data.labels).toEqual([]);
    expect(r.body.data.assignees).toEqual([]);
  });
});

describe('state machine', () => {
  test('create without assignees -> new; with assignees -> open', async () => {
    const repo = await repoOf();
    const a = await author.client.post(`${repo.api}/issues`, { title: 'A' });
    expect(a.body.data.state).toBe('new');
    const b = await author.client.post(`${repo.api}/issues`, {
      title: 'B',
      assignees: [{ display_name: `${member.username} Display` }],
    });
    expect(b.body.data.state).toBe('open');
  });

  test('new + first comment -> open', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    await outsider.client.post(`${repo.api}/issues/1/comments`, { body: 'hello' });
    expect((await s.anon.get(`${repo.api}/issues/1`)).body.data.state).toBe('open');
  });

  test('new + first assignee -> open', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    const r = await member.client.post(`${repo.api}/issues/1/assignees`, { user_id: author.id });
    expect(r.status).toBe(200);
    expect(r.body.data.state).toBe('open');
    expect(r.body.data.assignees.map((a: any) => a.id)).toEqual([author.id]);
  });

  test('open -> closed by the author or an org owner; closed -> open (reopen) likewise', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A', assignees: [{ user_id: member.id }] });
    const byOwner = await owner.client.patch(`${repo.api}/issues/1`, { state: 'closed' });
    expect(byOwner.body.data.state).toBe('closed');
    const reopen = await author.client.patch(`${repo.api}/issues/1`, { state: 'open' });
    expect(reopen.body.data.state).toBe('open');
    const byAuthor = await author.client.patch(`${repo.api}/issues/1`, { state: 'closed' });
    expect(byAuthor.body.data.state).toBe('closed');
    const ownerReopen = await owner.client.patch(`${repo.api}/issues/1`, { state: 'open' });
    expect(ownerReopen.body.data.state).toBe('open');
  });

  test('closing a new issue is allowed for its author (decision: withdraw an untriaged report)', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    const r = await author.client.patch(`${repo.api}/issues/1`, { state: 'closed' });
    expect(r.status).toBe(200);
    expect(r.body.data.state).toBe('closed');
    const reopened = await author.client.patch(`${repo.api}/issues/1`, { state: 'open' });
    expect(reopened.body.data.state).toBe('open');
  });

  test('a comment or an assignee on a closed issue keeps it closed', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    await author.client.patch(`${repo.api}/issues/1`, { state: 'closed' });
    await member.client.post(`${repo.api}/issues/1/comments`, { body: 'late' });
    const r = await member.client.post(`${repo.api}/issues/1/assignees`, { user_id: member.id });
    expect(r.body.data.state).toBe('closed');
  });

  test('state values other than open/closed answer 400', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    for (const state of ['new', 'merged', 'CLOSED']) {
      const r = await author.client.patch(`${repo.api}/issues/1`, { state });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('validation_failed');
    }
  });
});

describe('validation (a bad request creates nothing)', () => {
  async function expectNothingCreated(repoPath: string) {
    const all = await s.anon.get(`${repoPath}/issues?state=all`);
    expect(all.body.pagination.total).toBe(0);
  }

  test('missing or empty title, bad severity, unknown fields -> 400', async () => {
    const repo = await repoOf();
    for (const body of [
      {},
      { title: '' },
      { title: '   ' },
      { title: 'x', severity: 'urgent' },
      { title: 'x', severity: 3 },
      { title: 'x', state: 'open' },
      { title: 'x', labels: 'bug' },
      { title: 'x', assignees: [{}] },
    ]) {
      const r = await author.client.post(`${repo.api}/issues`, body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('validation_failed');
    }
    await expectNothingCreated(repo.api);
  });

  test('invalid severity on update -> 400', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    const r = await member.client.patch(`${repo.api}/issues/1`, { severity: 'blocker' });
    expect(r.status).toBe(400);
  });

  test('duplicate labels (case-insensitive) or assignees in a create request -> 400', async () => {
    const repo = await repoOf();
    await label(repo.api, 'bug');
    const dupLabels = await author.client.post(`${repo.api}/issues`, { title: 'x', labels: ['bug', 'BUG'] });
    expect(dupLabels.status).toBe(400);
    const dupIds = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ user_id: member.id }, { user_id: member.id }],
    });
    expect(dupIds.status).toBe(400);
    const dupMixed = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ user_id: member.id }, { display_name: `${member.username} Display` }],
    });
    expect(dupMixed.status).toBe(400);
    await expectNothingCreated(repo.api);
  });

  test('unknown label -> 404; unknown user or non-member assignee -> 404', async () => {
    const repo = await repoOf();
    const badLabel = await author.client.post(`${repo.api}/issues`, { title: 'x', labels: ['nope'] });
    expect(badLabel.status).toBe(404);
    expect(badLabel.body.error.code).toBe('not_found');
    const unknownUser = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ user_id: 987654 }],
    });
    expect(unknownUser.status).toBe(404);
    const nonMember = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ user_id: outsider.id }],
    });
    expect(nonMember.status).toBe(404);
    const nonMemberName = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ display_name: `${outsider.username} Display` }],
    });
    expect(nonMemberName.status).toBe(404);
    await expectNothingCreated(repo.api);
  });

  test('user_id and display_name naming different members -> 400; the same member -> ok', async () => {
    const repo = await repoOf();
    const mismatch = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ user_id: member.id, display_name: `${author.username} Display` }],
    });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.code).toBe('validation_failed');
    await expectNothingCreated(repo.api);
    const same = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ user_id: member.id, display_name: `${member.username} display` }],
    });
    expect(same.status).toBe(201);
    expect(same.body.data.assignees.map((a: any) => a.id)).toEqual([member.id]);
  });

  test('an assignee by username (case-insensitive), alone or with the other identifiers; a mismatch -> 400, a non-member -> 404', async () => {
    const repo = await repoOf();
    const byUsername = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ username: member.username.toUpperCase() }],
    });
    expect(byUsername.status).toBe(201);
    expect(byUsername.body.data.assignees).toEqual([
      expect.objectContaining({ id: member.id, username: member.username }),
    ]);
    const all = await author.client.post(`${repo.api}/issues/1/assignees`, {
      user_id: author.id,
      username: author.username,
      display_name: `${author.username} Display`,
    });
    expect(all.status).toBe(200);
    expect(all.body.data.assignees.map((a: any) => a.id)).toEqual([member.id, author.id]);
    const mismatch = await author.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: [{ user_id: member.id, username: author.username }],
    });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.message).toContain(
      `user_id ${member.id} and username "${author.username}" name different members`,
    );
    const nameMismatch = await author.client.post(`${repo.api}/issues/1/assignees`, {
      username: member.username,
      display_name: `${author.username} Display`,
    });
    expect(nameMismatch.status).toBe(400);
    for (const username of [outsider.username, 'nobody-at-all']) {
      const r = await author.client.post(`${repo.api}/issues/1/assignees`, { username });
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe('not_found');
    }
    expect((await s.anon.get(`${repo.api}/issues?state=all`)).body.pagination.total).toBe(1);
  });

  test('a display_name shared by several members -> 409 (create and add); user_id disambiguates', async () => {
    const twinOrgOwner = await s.newUser();
    const twinOrg = await s.newOrg(twinOrgOwner);
    const name = uniq('Twin');
    const mk = async () => {
      const username = uniq('twin');
      const r = await s.admin.post('/api/v1/admin/users', {
        username,
        email: `${username}@example.test`,
        display_name: name,
      });
      await s.admin.put(`/api/v1/orgs/${twinOrg}/members/${username}`, { role: 'member' });
      return r.body.data.id as number;
    };
    const first = await mk();
    await mk();
    const repoName = uniq('repo');
    await twinOrgOwner.client.post(`/api/v1/orgs/${twinOrg}/repos`, { name: repoName });
    const path = `/api/v1/repos/${twinOrg}/${repoName}`;
    const ambiguous = await twinOrgOwner.client.post(`${path}/issues`, {
      title: 'x',
      assignees: [{ display_name: name }],
    });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error.code).toBe('conflict');
    expect((await s.anon.get(`${path}/issues?state=all`)).body.pagination.total).toBe(0);
    await twinOrgOwner.client.post(`${path}/issues`, { title: 'y' });
    const addAmbiguous = await twinOrgOwner.client.post(`${path}/issues/1/assignees`, { display_name: name });
    expect(addAmbiguous.status).toBe(409);
    const exact = await twinOrgOwner.client.post(`${path}/issues/1/assignees`, {
      user_id: first,
      display_name: name,
    });
    expect(exact.status).toBe(200);
    expect(exact.body.data.assignees.map((a: any) => a.id)).toEqual([first]);
  });

  test('assignee cap (TRIAD_ISSUE_MAX_ASSIGNEES) -> 400 on create and on add', async () => {
    const capped = await startTestServer({ TRIAD_ISSUE_MAX_ASSIGNEES: '2' });
    try {
      const o = await capped.newUser();
      const cOrg = await capped.newOrg(o);
      const users = [await capped.newUser(), await capped.newUser(), await capped.newUser()];
      for (const u of users) await capped.addMember(cOrg, u);
      const repoName = uniq('repo');
      await o.client.post(`/api/v1/orgs/${cOrg}/repos`, { name: repoName });
      const path = `/api/v1/repos/${cOrg}/${repoName}`;
      const tooMany = await o.client.post(`${path}/issues`, {
        title: 'x',
        assignees: users.map((u) => ({ user_id: u.id })),
      });
      expect(tooMany.status).toBe(400);
      expect((await capped.anon.get(`${path}/issues?state=all`)).body.pagination.total).toBe(0);
      const ok = await o.client.post(`${path}/issues`, {
        title: 'x',
        assignees: users.slice(0, 2).map((u) => ({ user_id: u.id })),
      });
      expect(ok.status).toBe(201);
      const again = await o.client.post(`${path}/issues/1/assignees`, { user_id: users[0]!.id });
      expect(again.status).toBe(200);
      const third = await o.client.post(`${path}/issues/1/assignees`, { user_id: users[2]!.id });
      expect(third.status).toBe(400);
      expect(third.body.error.code).toBe('validation_failed');
      const removed = await o.client.delete(`${path}/issues/1/assignees/${users[0]!.id}`);
      expect(removed.status).toBe(200);
      const nowOk = await o.client.post(`${path}/issues/1/assignees`, { user_id: users[2]!.id });
      expect(nowOk.status).toBe(200);
      expect(nowOk.body.data.assignees).toHaveLength(2);
    } finally {
      await capped.close();
    }
  });

  test('the default cap is 10', async () => {
    const repo = await repoOf();
    const many: TestUser[] = [];
    for (let i = 0; i < 11; i++) {
      const u = await s.newUser();
      await s.addMember(org, u);
      many.push(u);
    }
    const r = await owner.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: many.map((u) => ({ user_id: u.id })),
    });
    expect(r.status).toBe(400);
    const ten = await owner.client.post(`${repo.api}/issues`, {
      title: 'x',
      assignees: many.slice(0, 10).map((u) => ({ user_id: u.id })),
    });
    expect(ten.status).toBe(201);
    expect(ten.body.data.assignees).toHaveLength(10);
  });

  test('comment body must not be empty', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    for (const body of [{}, { body: '' }, { body: '  ' }]) {
      const r = await author.client.post(`${repo.api}/issues/1/comments`, body);
      expect(r.status).toBe(400);
    }
    expect((await s.anon.get(`${repo.api}/issues/1`)).body.data.state).toBe('new');
  });
});

describe('labels and assignees on an issue', () => {
  test('add and remove a label; the DELETE path name is URL-decoded (bug%2Fcrash)', async () => {
    const repo = await repoOf();
    await label(repo.api, 'bug/crash');
    await label(repo.api, 'ui');
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    const added = await member.client.post(`${repo.api}/issues/1/labels`, { name: 'bug/crash' });
    expect(added.status).toBe(200);
    expect(added.body.data.labels.map((l: any) => l.name)).toEqual(['bug/crash']);
    const again = await member.client.post(`${repo.api}/issues/1/labels`, { name: 'BUG/crash' });
    expect(again.status).toBe(200);
    expect(again.body.data.labels).toHaveLength(1);
    await member.client.post(`${repo.api}/issues/1/labels`, { name: 'ui' });
    const removed = await member.client.delete(`${repo.api}/issues/1/labels/bug%2Fcrash`);
    expect(removed.status).toBe(200);
    expect(removed.body.data.labels.map((l: any) => l.name)).toEqual(['ui']);
    expect(removed.body.data.severity).toBe('none');
    const notOn = await member.client.delete(`${repo.api}/issues/1/labels/bug%2Fcrash`);
    expect(notOn.status).toBe(404);
    const unknown = await member.client.post(`${repo.api}/issues/1/labels`, { name: 'nope' });
    expect(unknown.status).toBe(404);
    const noIssue = await member.client.post(`${repo.api}/issues/7/labels`, { name: 'ui' });
    expect(noIssue.status).toBe(404);
  });

  test('add assignee by display_name; unknown, non-member -> 404; remove; removing again -> 404', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    const byName = await member.client.post(`${repo.api}/issues/1/assignees`, {
      display_name: `${author.username} Display`,
    });
    expect(byName.status).toBe(200);
    expect(byName.body.data.assignees.map((a: any) => a.id)).toEqual([author.id]);
    expect(
      (await member.client.post(`${repo.api}/issues/1/assignees`, { display_name: 'Nobody At All' })).status,
    ).toBe(404);
    expect(
      (await member.client.post(`${repo.api}/issues/1/assignees`, { user_id: outsider.id })).status,
    ).toBe(404);
    expect((await member.client.post(`${repo.api}/issues/1/assignees`, {})).status).toBe(400);
    const removed = await member.client.delete(`${repo.api}/issues/1/assignees/${author.id}`);
    expect(removed.status).toBe(200);
    expect(removed.body.data.assignees).toEqual([]);
    expect(removed.body.data.state).toBe('open');
    expect((await member.client.delete(`${repo.api}/issues/1/assignees/${author.id}`)).status).toBe(404);
    expect((await member.client.delete(`${repo.api}/issues/1/assignees/abc`)).status).toBe(404);
  });
});

describe('permissions', () => {
  test('any authenticated user with issues:write may create and comment on a public repository', async () => {
    const repo = await repoOf();
    const r = await outsider.client.post(`${repo.api}/issues`, { title: 'From outside' });
    expect(r.status).toBe(201);
    expect((await outsider.client.post(`${repo.api}/issues/1/comments`, { body: 'hi' })).status).toBe(201);
  });

  test('title, body and state: author and owner yes; other member and outsider 403; severity: anyone with issues:write', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    const path = `${repo.api}/issues/1`;
    for (const u of [member, outsider]) {
      for (const body of [{ title: 'hijack' }, { body: 'hijack' }, { state: 'closed' }]) {
        const r = await u.client.patch(path, body);
        expect(r.status).toBe(403);
      }
    }
    expect((await author.client.patch(path, { title: 'by author' })).status).toBe(200);
    expect((await owner.client.patch(path, { body: 'by owner' })).status).toBe(200);
    const sev = await outsider.client.patch(path, { severity: 'low' });
    expect(sev.status).toBe(200);
    expect(sev.body.data).toMatchObject({ title: 'by author', body: 'by owner', severity: 'low' });
    const admin = await s.admin.patch(path, { state: 'closed' });
    expect(admin.status).toBe(200);
  });

  test('a token without issues:write gets 403 on every write; anonymous gets 401', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'A' });
    const reader = await s.newUser(undefined, { scopes: ['issues:read', 'repo:read', 'repo:write'] });
    await s.addMember(org, reader);
    const writes: [string, string, unknown][] = [
      ['POST', `${repo.api}/issues`, { title: 'x' }],
      ['PATCH', `${repo.api}/issues/1`, { severity: 'low' }],
      ['POST', `${repo.api}/issues/1/comments`, { body: 'x' }],
      ['POST', `${repo.api}/issues/1/labels`, { name: 'x' }],
      ['DELETE', `${repo.api}/issues/1/labels/x`, undefined],
      ['POST', `${repo.api}/issues/1/assignees`, { user_id: member.id }],
      ['DELETE', `${repo.api}/issues/1/assignees/${member.id}`, undefined],
    ];
    for (const [method, path, body] of writes) {
      const denied = await reader.client.request(method, path, body);
      expect([method, path, denied.status]).toEqual([method, path, 403]);
      const anon = await s.anon.request(method, path, body);
      expect([method, path, anon.status]).toEqual([method, path, 401]);
    }
    expect((await reader.client.get(`${repo.api}/issues/1`)).status).toBe(200);
  });

  test('a private repository: outsiders and anonymous get 404; members with issues:read read it; a token without issues:read gets 403', async () => {
    const repo = await repoOf(true);
    const created = await member.client.post(`${repo.api}/issues`, { title: 'Secret' });
    expect(created.status).toBe(201);
    for (const c of [s.anon, outsider.client]) {
      expect((await c.get(`${repo.api}/issues`)).status).toBe(404);
      expect((await c.get(`${repo.api}/issues/1`)).status).toBe(404);
      expect((await c.get(`${repo.api}/issues/labels`)).status).toBe(404);
    }
    const write = await outsider.client.post(`${repo.api}/issues`, { title: 'x' });
    expect(write.status).toBe(404);
    expect((await outsider.client.post(`${repo.api}/issues/1/comments`, { body: 'x' })).status).toBe(404);
    expect((await member.client.get(`${repo.api}/issues/1`)).status).toBe(200);
    const noIssues = await s.newUser(undefined, { scopes: ['repo:read'] });
    await s.addMember(org, noIssues);
    expect((await noIssues.client.get(`${repo.api}/issues`)).status).toBe(403);
  });

  test('a repo-level token reaches only its repository', async () => {
    const a = await repoOf();
    const b = await repoOf();
    const t = await member.client.post('/api/v1/user/tokens', {
      name: 'repo-only',
      scopes: ['issues:write'],
      level: 'repo',
      target: `${org}/${a.name}`,
    });
    expect(t.status).toBe(201);
    const scoped = s.anon.as(t.body.data.token);
    expect((await scoped.post(`${a.api}/issues`, { title: 'ok' })).status).toBe(201);
    expect((await scoped.post(`${b.api}/issues`, { title: 'no' })).status).toBe(403);
  });
});

describe('events (transactional outbox)', () => {
  test('opened, commented, closed and reopened carry {action, issue, sender, repository}', async () => {
    const repo = await repoOf();
    await label(repo.api, 'bug');
    const created = await author.client.post(`${repo.api}/issues`, { title: 'Evt', labels: ['bug'] });
    const comment = await member.client.post(`${repo.api}/issues/1/comments`, { body: 'seen' });
    await author.client.patch(`${repo.api}/issues/1`, { state: 'closed' });
    await author.client.patch(`${repo.api}/issues/1`, { state: 'closed' }); // no-op: no event
    await owner.client.patch(`${repo.api}/issues/1`, { state: 'open' });
    await member.client.patch(`${repo.api}/issues/1`, { severity: 'high' }); // no event
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => e.event_type)).toEqual([
      'issue.opened',
      'issue.commented',
      'issue.closed',
      'issue.reopened',
    ]);
    const repository = { id: repo.id, name: repo.name, org };
    const [opened, commented, closed, reopened] = events;
    expect(opened!.sender_id).toBe(author.id);
    expect(opened!.payload).toEqual({
      action: 'opened',
      issue: created.body.data,
      sender: created.body.data.author,
      repository,
    });
    expect(commented!.payload).toMatchObject({
      action: 'commented',
      issue: { number: 1, state: 'open' },
      comment: comment.body.data,
      sender: { id: member.id, username: member.username },
      repository,
    });
    expect(closed!.payload).toMatchObject({
      action: 'closed',
      issue: { number: 1, state: 'closed' },
      sender: { id: author.id },
      repository,
    });
    expect(reopened!.payload).toMatchObject({
      action: 'reopened',
      issue: { number: 1, state: 'open' },
      sender: { id: owner.id },
    });
    expect(reopened!.sender_id).toBe(owner.id);
  });

  test('a failed create writes no event', async () => {
    const repo = await repoOf();
    await author.client.post(`${repo.api}/issues`, { title: 'x', labels: ['missing'] });
    expect(await outboxEvents(s, repo.id)).toEqual([]);
  });
});
