import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { pipelineYaml, pushWith, type Pushed } from '../helpers/serve.ts';
import { sleep, waitUntil } from '../helpers/wait.ts';
import { leaveWhileLocked, rawRequest } from '../helpers/pg-locks.ts';

/**
 * An agent whose poll's connection closes before the answer claims nothing: the pending
 * pipeline stays in the queue for the next agent, whether the agent left while the server was
 * still recording it or during the long wait. (A claim for nobody stays `running` until the
 * reaper ends it as `error`, which is how a CI run once lost a pipeline between two tests.)
 */

let s: TestServer;
let owner: TestUser;
let db: pg.Client;
beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  db = new pg.Client({ connectionString: s.dbUrl });
  await db.connect();
});
afterAll(async () => {
  await db.end();
  await s.close();
});

async function agent(): Promise<{ id: number; token: string }> {
  const r = await s.admin.post('/api/v1/admin/agents', { name: uniq('leaver') });
  expect(r.status).toBe(201);
  return { id: r.body.data.id, token: r.body.data.token };
}

/** A poll, as raw HTTP. */
const pollRequest = (token: string, instance: string, waitSeconds: number) =>
  `POST /api/v1/ci/poll?wait=${waitSeconds} HTTP/1.1\r\nHost: triad\r\n` +
  `Authorization: Bearer ${token}\r\nX-Svc-Agent-Instance: ${instance}\r\nContent-Length: 0\r\n\r\n`;

async function queued(): Promise<Pushed> {
  const r = await pushWith(owner, { vcs: 'git' }, (w) =>
    fs.writeFile(path.join(w, '.pipeline.yml'), pipelineYaml([{ name: 'one', commands: ['true'] }])),
  );
  expect((await owner.client.get(`/api/v1/repos/${r.org}/${r.name}/pipelines/1`)).body.status).toBe(
    'pending',
  );
  return r;
}

const instanceSeen = async (agentId: number, instance: string) =>
  (await db.query('select 1 from agent_instances where agent_id = $1 and instance = $2', [agentId, instance]))
    .rowCount === 1;

/** The pipeline is still pending, and the next agent's poll claims it. */
async function claimedByNext(r: Pushed): Promise<void> {
  expect((await owner.client.get(`/api/v1/repos/${r.org}/${r.name}/pipelines/1`)).body.status).toBe(
    'pending',
  );
  const next = await agent();
  const poll = await s.anon.as(next.token).post('/api/v1/ci/poll?wait=5');
  expect(poll.status).toBe(200);
  expect([poll.body.org, poll.body.repo, poll.body.number]).toEqual([r.org, r.name, 1]);
}

describe('a poll whose agent leaves before the answer', () => {
  test('when the agent left while the server was still recording it, then the pending pipeline is not claimed for it', async () => {
    const r = await queued();
    const a = await agent();
    // the server's record of the poll waits on this lock of the agent's row
    await leaveWhileLocked({
      dbUrl: s.dbUrl,
      serverUrl: s.url,
      lock: ['select 1 from agents where id = $1 for update', [a.id]],
      request: pollRequest(a.token, 'held', 5),
      like: '%update agents set last_seen_at%',
      what: 'the poll waiting on the lock',
    });
    await waitUntil('the poll recorded', () => instanceSeen(a.id, 'held'), 10_000);
    // what a claim for nobody would need to happen, had the server not noticed
    await sleep(1000);
    await claimedByNext(r);
  }, 60_000);

  test('when the agent left during the long wait, then a pipeline queued afterwards is not claimed for it', async () => {
    const a = await agent();
    const sock = await rawRequest(s.url, pollRequest(a.token, 'waiting', 20));
    await waitUntil('the poll recorded', () => instanceSeen(a.id, 'waiting'), 10_000);
    sock.destroy();
    await sleep(300);
    const r = await queued();
    await sleep(1000);
    await claimedByNext(r);
  }, 60_000);
});
