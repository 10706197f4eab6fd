import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { pipelineYaml, pushWith } from '../helpers/serve.ts';
import { waitForLockWait } from '../helpers/pg-locks.ts';

/**
 * At shutdown the server errors what its embedded agent's process could not report in time
 * (src/embedded-agent.ts). A report of that process still in flight holds the pipeline's row:
 * the server waits for it rather than passing the pipeline over, which left it `running` after
 * the server was gone.
 */

let s: TestServer;
let owner: TestUser;
beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
});
afterAll(() => s.close());

describe('ending the pipelines of an agent process that stopped', () => {
  test('when a report of the process holds the pipeline row, then the pipeline still becomes error once the report is done, with the message', async () => {
    const r = await pushWith(owner, { vcs: 'git' }, (w) =>
      fs.writeFile(path.join(w, '.pipeline.yml'), pipelineYaml([{ name: 'one', commands: ['true'] }])),
    );
    const reg = await s.admin.post('/api/v1/admin/agents', { name: uniq('stopper') });
    expect(reg.status).toBe(201);
    const caller = { agentId: reg.body.data.id as number, instance: 'embedded', nonce: uniq('nonce') };
    const headers = { 'x-svc-agent-instance': caller.instance, 'x-svc-agent-nonce': caller.nonce };
    const poll = await s.anon
      .as(reg.body.data.token)
      .request('POST', '/api/v1/ci/poll?wait=5', undefined, headers);
    expect(poll.status).toBe(200);
    const pipelineUrl = `/api/v1/repos/${r.org}/${r.name}/pipelines/1`;
    expect((await owner.client.get(pipelineUrl)).body.status).toBe('running');

    // a step report of the process in its transaction: it holds the pipeline row shared
    const report = new pg.Client({ connectionString: s.dbUrl });
    await report.connect();
    try {
      await report.query('begin');
      await report.query('select 1 from pipelines where id = $1 for share', [poll.body.pipeline_id]);
      const ended = s.running.services.pipelines.agentSide.abandonProcess(
        caller,
        'the server stopped',
        10_000,
      );
      await waitForLockWait(s.dbUrl, '%agent_nonce = %for update%', 'the server waiting on the report');
      await report.query('commit');
      expect(await ended).toEqual([poll.body.pipeline_id]);
    } finally {
      await report.end();
    }
    expect((await owner.client.get(pipelineUrl)).body).toMatchObject({
      status: 'error',
      error_message: 'the server stopped',
    });
  });

  test('when the process holds nothing running, then nothing changes', async () => {
    const reg = await s.admin.post('/api/v1/admin/agents', { name: uniq('idle') });
    const caller = { agentId: reg.body.data.id as number, instance: 'embedded', nonce: uniq('nonce') };
    expect(await s.running.services.pipelines.agentSide.abandonProcess(caller, 'x', 1_000)).toEqual([]);
  });
});
