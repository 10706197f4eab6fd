/**
 * How fast a long-polling agent gets a pipeline created while it waits (issue target: 100 ms).
 * Starts a server (embedded PostgreSQL in a temporary directory, or DATABASE_URL), pushes one git
 * commit with a pipeline file, then N times: an agent waits in `POST /api/v1/ci/poll?wait=30`, a
 * user reruns the pipeline, and the time from the rerun's answer to the poll's answer is recorded.
 * Last, the server is closed while an agent waits: the time to the poll's answer and to the end.
 *
 *   npm run bench:ci [-- --iterations 200]
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pushPipeline } from './lib/git.ts';
import { startBenchServer } from './lib/server.ts';

const { values } = parseArgs({ options: { iterations: { type: 'string', default: '200' } } });
const iterations = Number(values.iterations);

const server = await startBenchServer('ci');
const running = server.running;
const dir = server.dir;
const token = server.token;
const base = running.url;
const call = async (method: string, p: string, auth: string, body?: unknown) => {
  const r = await fetch(`${base}${p}`, {
    method,
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: r.status === 204 ? undefined : ((await r.json()) as Record<string, any>) };
};

let closed = false;
try {
  await call('POST', '/api/v1/orgs', token, { name: 'bench' });
  await call('POST', '/api/v1/orgs/bench/repos', token, { name: 'ci', vcs: 'git' });
  await pushPipeline({
    base,
    token,
    org: 'bench',
    repo: 'ci',
    work: path.join(dir, 'work'),
    pipelineFile: 'steps:\n  - name: s\n    image: alpine\n    commands: ["true"]\n',
  });
  const agent = (await call('POST', '/api/v1/admin/agents', token, { name: 'bench' })).body!.data
    .token as string;
  await call('POST', '/api/v1/ci/poll', agent); // claims pipeline 1

  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const polled = call('POST', '/api/v1/ci/poll?wait=30', agent).then((r) => ({ r, at: performance.now() }));
    await new Promise((r) => setTimeout(r, 20)); // the agent is waiting on the server
    const rerun = await call('POST', '/api/v1/repos/bench/ci/pipelines/1/rerun', token);
    const created = performance.now();
    const { r, at } = await polled;
    if (r.status !== 200 || r.body!.number !== rerun.body!.number)
      throw new Error(`unexpected poll answer ${r.status}`);
    samples.push(at - created);
  }
  samples.sort((a, b) => a - b);
  const q = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))]!.toFixed(2);
  console.log(
    `long-poll wake-up over ${iterations} pipelines: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${samples.at(-1)!.toFixed(2)} ms`,
  );

  // Shutdown with an agent waiting: the poll is answered (204) and the close does not wait for it.
  const last = call('POST', '/api/v1/ci/poll?wait=30', agent).then((r) => ({ r, at: performance.now() }));
  await new Promise((r) => setTimeout(r, 300));
  const closing = performance.now();
  closed = true;
  const done = server.close().then(() => performance.now());
  const { r, at } = await last;
  const end = await done;
  console.log(
    `close with a waiting long poll: answered ${r.status} after ${(at - closing).toFixed(0)} ms, closed after ${(end - closing).toFixed(0)} ms`,
  );
} finally {
  if (!closed) await server.close();
}
