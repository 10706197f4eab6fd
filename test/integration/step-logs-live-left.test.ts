/**
 * A live step log whose browser leaves before the stream starts (while the server still reads the
 * step) gives its slot back: the user can still open the 16 live logs a user may hold at once.
 */
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { TWO_STEPS, commitFiles, gitRepo, newAgent } from '../helpers/ci.ts';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { sleep } from '../helpers/wait.ts';
import { leaveWhileLocked } from '../helpers/pg-locks.ts';
import { webSessionCookie } from '../helpers/web-session.ts';

let s: TestServer;
let owner: TestUser;
let cookie: string;

beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  cookie = await webSessionCookie(s, owner);
}, 60_000);
afterAll(async () => {
  await s?.close();
});

/** Opens 16 live logs at once: whether all answered 200 (all are closed again). */
async function sixteenOpen(url: string): Promise<boolean> {
  const streams = await Promise.all(
    Array.from({ length: 16 }, async () => {
      const abort = new AbortController();
      const r = await fetch(url, {
        headers: { cookie },
        signal: AbortSignal.any([abort.signal, AbortSignal.timeout(10_000)]),
      });
      return { status: r.status, abort };
    }),
  );
  for (const x of streams) x.abort.abort();
  return streams.every((x) => x.status === 200);
}

test('when the browser leaves while the server reads the step, then its live-log slot is given back', async () => {
  const org = await s.newOrg(owner);
  const repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': TWO_STEPS });
  await repo.push();
  const agent = await newAgent(s);
  const job = (await agent.post('/api/v1/ci/poll')).body;
  expect((await agent.put(`/api/v1/ci/steps/${job.steps[0].id}/status`, { status: 'running' })).status).toBe(
    200,
  );
  const path = `/${org}/${repo.name}/-/pipelines/1/steps/1/live`;

  // the server's read of the step waits on this lock
  await leaveWhileLocked({
    dbUrl: s.dbUrl,
    serverUrl: s.url,
    lock: ['lock table pipeline_steps in access exclusive mode', []],
    request: `GET ${path} HTTP/1.1\r\nHost: triad\r\nCookie: ${cookie}\r\n\r\n`,
    like: '%pipeline_steps%',
    what: 'the live log waiting on the lock',
  });
  // a stream that hung for nobody would hold one of the 16 slots for good
  let all = false;
  const end = Date.now() + 10_000;
  while (!all && Date.now() < end) {
    all = await sixteenOpen(`${s.url}${path}`);
    if (!all) await sleep(200);
  }
  expect(all).toBe(true);
  expect(
    (await agent.put(`/api/v1/ci/pipelines/${job.pipeline_id}/status`, { status: 'failure' })).status,
  ).toBe(200);
}, 60_000);
