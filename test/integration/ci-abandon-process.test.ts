import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { pipelineYaml, pushWith } from '../helpers/serve.ts';
import { whileLocked } from '../helpers/pg-locks.ts';

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

/** A pending pipeline claimed by a poll of a fresh agent's process, which then stops. */
async function claimed() {
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
  return { caller, pipelineId: poll.body.pipeline_id as number, pipelineUrl };
}

describe('ending the pipelines of an agent process that stopped', () => {
  test('when a report of the process holds the pipeline row, then the pipeline still becomes error once the report is done, with the message', async () => {
    const { caller, pipelineId, pipelineUrl } = await claimed();
    // a step report of the process in its transaction: it holds the pipeline row shared
    const ended = await whileLocked({
      dbUrl: s.dbUrl,
      lock: ['select 1 from pipelines where id = $1 for share', [pipelineId]],
      like: '%agent_nonce = %for update%',
      what: 'the server waiting on the report',
      during: () =>
        s.running.services.pipelines.agentSide.abandonProcess(caller, 'the server stopped', 10_000),
    });
    expect(ended).toEqual([pipelineId]);
    expect((await owner.client.get(pipelineUrl)).body).toMatchObject({
      status: 'error',
      error_message: 'the server stopped',
    });
  });

  test('when a log append of the process holds a step row past the wait, then the pipeline still becomes error once it is done', async () => {
    const { caller, pipelineId, pipelineUrl } = await claimed();
    // a log append holds its step row while it writes the chunk, here past the 300 ms the
    // pipelines' lock may be waited for
    const ended = await whileLocked({
      dbUrl: s.dbUrl,
      lock: ['select 1 from pipeline_steps where pipeline_id = $1 for update', [pipelineId]],
      like: 'update pipeline_steps%',
      what: 'the server waiting on the append',
      hold: 600,
      during: () => s.running.services.pipelines.agentSide.abandonProcess(caller, 'the server stopped', 300),
    });
    expect(ended).toEqual([pipelineId]);
    expect((await owner.client.get(pipelineUrl)).body.status).toBe('error');
  });

  test('when an agent is deregistered while a report of it holds the pipeline row, then the pipeline becomes error once the report is done', async () => {
    const { caller, pipelineId, pipelineUrl } = await claimed();
    const removed = await whileLocked({
      dbUrl: s.dbUrl,
      lock: ['select 1 from pipelines where id = $1 for share', [pipelineId]],
      like: 'select id from pipelines%for update%',
      what: 'the removal waiting on the report',
      during: () => s.admin.delete(`/api/v1/admin/agents/${caller.agentId}`),
    });
    expect(removed.status).toBe(204);
    expect((await owner.client.get(pipelineUrl)).body).toMatchObject({
      status: 'error',
      error_message: expect.stringMatching(/^agent stopper\w* was deregistered$/),
    });
  });

  test('when the process holds nothing running, then nothing changes', async () => {
    const reg = await s.admin.post('/api/v1/admin/agents', { name: uniq('idle') });
    const caller = { agentId: reg.body.data.id as number, instance: 'embedded', nonce: uniq('nonce') };
    expect(await s.running.services.pipelines.agentSide.abandonProcess(caller, 'x', 1_000)).toEqual([]);
  });
});
