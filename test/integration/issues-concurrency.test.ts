import { describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { outboxEvents } from '../helpers/outbox.ts';

let s: TestServer;
let owner: TestUser;
let org: string;

withOrgServer({}, (w) => ({ s, owner, org } = w));

describe('per-repository issue numbers', () => {
  test('50 concurrent creates in one repository get 50 distinct consecutive numbers', async () => {
    const name = uniq('repo');
    const repo = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name });
    const path = `/api/v1/repos/${org}/${name}`;
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => owner.client.post(`${path}/issues`, { title: `issue ${i}` })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(50).fill(201));
    const got = results.map((r) => r.body.data.number as number).sort((a, b) => a - b);
    expect(got).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const listed = await s.anon.get(`${path}/issues?state=all&per_page=100`);
    expect(listed.body.pagination.total).toBe(50);
    const events = await outboxEvents(s, repo.body.data.id);
    expect(events.filter((e) => e.event_type === 'issue.opened')).toHaveLength(50);
  });

  test('numbers are per repository, and a failed create does not use up a number', async () => {
    const a = uniq('repo');
    const b = uniq('repo');
    await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: a });
    await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: b });
    const pa = `/api/v1/repos/${org}/${a}`;
    const pb = `/api/v1/repos/${org}/${b}`;
    expect((await owner.client.post(`${pa}/issues`, { title: 'a1' })).body.data.number).toBe(1);
    expect((await owner.client.post(`${pb}/issues`, { title: 'b1' })).body.data.number).toBe(1);
    expect((await owner.client.post(`${pa}/issues`, { title: 'bad', labels: ['missing'] })).status).toBe(404);
    expect((await owner.client.post(`${pa}/issues`, { title: 'a2' })).body.data.number).toBe(2);
  });

  test('concurrent assignee adds never exceed the cap', async () => {
    const capped = await startTestServer({ TRIAD_ISSUE_MAX_ASSIGNEES: '3' });
    try {
      const o = await capped.newUser();
      const cOrg = await capped.newOrg(o);
      const users: TestUser[] = [];
      for (let i = 0; i < 8; i++) {
        const u = await capped.newUser();
        await capped.addMember(cOrg, u);
        users.push(u);
      }
      const name = uniq('repo');
      await o.client.post(`/api/v1/orgs/${cOrg}/repos`, { name });
      const path = `/api/v1/repos/${cOrg}/${name}`;
      await o.client.post(`${path}/issues`, { title: 'busy' });
      const results = await Promise.all(
        users.map((u) => o.client.post(`${path}/issues/1/assignees`, { user_id: u.id })),
      );
      expect(results.filter((r) => r.status === 200)).toHaveLength(3);
      expect(results.filter((r) => r.status === 400)).toHaveLength(5);
      const issue = await capped.anon.get(`${path}/issues/1`);
      expect(issue.body.data.assignees).toHaveLength(3);
      expect(issue.body.data.state).toBe('open');
    } finally {
      await capped.close();
    }
  });
});
