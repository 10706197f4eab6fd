import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, withOrgServer } from '../helpers/factories.ts';
import { PrRepo, settled } from '../helpers/pulls.ts';
import { statusRule } from '../helpers/status-rules.ts';
import { waitFor } from '../helpers/wait.ts';

/**
 * Triad's own pipelines as commit statuses (`triad/pipeline`) and a required pipeline gating a
 * merge, with the embedded local agent running the steps for real.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer(
  { TRIAD_EMBEDDED_AGENT: 'local', TRIAD_PULL_CHECK_BUDGET_MS: '60000' },
  (w) => ({ s, owner, org } = w),
);

const PIPELINE = `steps:
  - name: check
    image: alpine
    commands: ["test -f fixed"]
`;

describe('a required pipeline', () => {
  test('when the pull request pipeline fails, then the merge is refused (checks_failed); after a fixing push succeeds, it merges', async () => {
    const repo = await PrRepo.create(owner, org, 'git');
    await statusRule(s, repo.id, { pattern: 'main', require_pipeline: true });
    await repo.commitOn('main', { '.pipeline.yml': PIPELINE }, 'ci');
    await repo.commitOn('feature', { 'a.txt': 'a\n' }, 'feature');
    const pr = (await owner.client.post(`${repo.api}/pulls`, { title: 'f', source_ref: 'feature' })).body
      .data;
    const at = `${repo.api}/pulls/${pr.number}`;
    const checksOf = async (state: string, head?: string) => {
      const p = await settled(owner.client, at);
      return p.checks.state === state && (head === undefined || p.head_commit === head) ? p : undefined;
    };

    const failed = await waitFor('failed checks', () => checksOf('failure'), 90_000, 300);
    expect(failed.checks.contexts).toEqual([
      {
        context: 'triad/pipeline',
        state: 'failure',
        target_url: expect.stringMatching(new RegExp(`^${s.url}/${org}/${repo.name}/-/pipelines/\\d+$`)),
      },
    ]);
    expectError(await owner.client.post(`${at}/merge`, {}), 409, 'checks_failed');
    // the pipeline's statuses on the commit: pending first, then failure, as Triad reported them
    const statuses = await owner.client.get(`${repo.api}/commits/${failed.head_commit}/statuses`);
    expect(statuses.body.data[0]).toMatchObject({
      context: 'triad/pipeline',
      state: 'failure',
      creator: null,
      latest: true,
    });
    expect(statuses.body.data.at(-1)).toMatchObject({ context: 'triad/pipeline', state: 'pending' });

    await repo.commitOn('feature', { fixed: 'yes\n' }, 'fix');
    const fixed = await settled(owner.client, at);
    expect(fixed.head_commit).not.toBe(failed.head_commit);
    // a new head starts over: nothing passed on it yet
    if (fixed.checks.state !== 'success') {
      expect(fixed.checks.state).toBe('pending');
      expectError(await owner.client.post(`${at}/merge`, {}), 409, 'checks_pending');
    }
    await waitFor('passed checks', () => checksOf('success', fixed.head_commit), 90_000, 300);
    const merged = await owner.client.post(`${at}/merge`, {});
    expect(merged.status).toBe(200);
    expect(merged.body.data.status).toBe('merged');
  });
});
