/**
 * Step-log compaction on MinIO: a server (embedded PostgreSQL, `TRIAD_S3_*` pointing at a MinIO
 * on loopback, compaction driven by this script) gets one step log as `--chunks` appends of
 * `--chunk-bytes` each through the agent protocol (what an agent flushing every 250 ms sends over
 * a long step), then measures, before and after the compaction:
 *   - the API's whole-log read (`GET .../steps/1/log`), p50 and p90 of `--reads` reads,
 *   - a 64 KiB ranged read in the middle of the log (the web's `raw` and live view read path),
 *   - the objects under the step's prefix in the bucket,
 * and the time the compaction of that step took (concatenation into one object, the swap of the
 * rows, the deletion of the old objects). Results are printed; bench/README.md records them.
 *
 *   npm run bench:log-compaction [-- --chunks 2000 --chunk-bytes 2048 --reads 20]
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startMinio } from '../test/helpers/minio.ts';
import { pushPipeline } from './lib/git.ts';
import { startBenchServer } from './lib/server.ts';

const { values } = parseArgs({
  options: {
    chunks: { type: 'string', default: '2000' },
    'chunk-bytes': { type: 'string', default: '2048' },
    reads: { type: 'string', default: '20' },
  },
});
const CHUNKS = Number(values.chunks);
const CHUNK = Number(values['chunk-bytes']);
const READS = Number(values.reads);
const BUCKET = 'bench-logs';

const minio = await startMinio();
const server = await startBenchServer('log-compaction', {
  TRIAD_S3_ENDPOINT: `${minio.host}:${minio.port}`,
  TRIAD_S3_ACCESS_KEY: minio.accessKey,
  TRIAD_S3_SECRET_KEY: minio.secretKey,
  TRIAD_S3_BUCKET: BUCKET,
  TRIAD_LOG_COMPACTION_INTERVAL: '0', // this script compacts
  TRIAD_LOG_COMPACTION_GRACE: '0',
  TRIAD_AGENT_TIMEOUT: '3600', // the appends take longer than an agent's default silence
});
const base = server.url;
const call = async (method: string, p: string, auth: string, body?: string | object) => {
  const r = await fetch(`${base}${p}`, {
    method,
    headers: {
      authorization: `Bearer ${auth}`,
      'content-type': typeof body === 'string' ? 'text/plain' : 'application/json',
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  if (r.status >= 400) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return { text, json: () => JSON.parse(text) as Record<string, any> };
};
const time = async (fn: () => Promise<unknown>) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};
const quantiles = async (fn: () => Promise<unknown>) => {
  const samples: number[] = [];
  for (let i = 0; i < READS; i++) samples.push(await time(fn));
  samples.sort((a, b) => a - b);
  const q = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))]!;
  return `p50 ${q(0.5).toFixed(1)} ms, p90 ${q(0.9).toFixed(1)} ms`;
};
const objects = async (prefix: string) => {
  const names: unknown[] = [];
  for await (const o of minio.client().listObjectsV2(BUCKET, prefix, true)) names.push(o);
  return names.length;
};

try {
  const token = server.token;
  await call('POST', '/api/v1/orgs', token, { name: 'bench' });
  await call('POST', '/api/v1/orgs/bench/repos', token, { name: 'logs', vcs: 'git' });
  await pushPipeline({
    base,
    token,
    org: 'bench',
    repo: 'logs',
    work: path.join(server.dir, 'work'),
    pipelineFile: 'steps:\n  - name: s\n    image: alpine\n    commands: ["true"]\n',
  });
  const agent = (await call('POST', '/api/v1/admin/agents', token, { name: 'bench' })).json().data
    .token as string;
  const job = (await call('POST', '/api/v1/ci/poll', agent)).json();
  const step = job.steps[0].id as number;
  await call('PUT', `/api/v1/ci/steps/${step}/status`, agent, { status: 'running' });
  const line = `${'x'.repeat(CHUNK - 1)}\n`;
  const appendMs = await time(async () => {
    for (let i = 0; i < CHUNKS; i++) await call('POST', `/api/v1/ci/steps/${step}/log`, agent, line);
  });
  await call('PUT', `/api/v1/ci/steps/${step}/status`, agent, { status: 'success', exit_code: 0 });
  const size = CHUNKS * CHUNK;
  const prefix = `logs/${job.pipeline_id}/${step}/`;
  const logs = server.running.services.pipelines;
  const whole = async () => {
    const r = await call('GET', '/api/v1/repos/bench/logs/pipelines/1/steps/1/log', token);
    if (r.text.length !== size) throw new Error(`read ${r.text.length} bytes, expected ${size}`);
  };
  const ranged = async () => {
    let n = 0;
    const from = Math.floor(size / 2);
    for await (const b of logs.stepLogs.range(step, from, from + 65536)) n += b.length;
    if (n !== Math.min(65536, size - from)) throw new Error(`ranged read of ${n} bytes`);
  };
  console.log(`log: ${CHUNKS} chunks of ${CHUNK} bytes (${(size / 1048576).toFixed(1)} MiB)`);
  console.log(`  appends through the agent protocol: ${(appendMs / CHUNKS).toFixed(2)} ms each`);
  console.log(`before: ${await objects(prefix)} objects`);
  console.log(`  whole-log API read: ${await quantiles(whole)}`);
  console.log(`  64 KiB ranged read: ${await quantiles(ranged)}`);
  let result: { compacted: number; deleted: number } = { compacted: 0, deleted: 0 };
  const compactMs = await time(async () => (result = await logs.compactor.runOnce()));
  console.log(
    `compaction: ${compactMs.toFixed(0)} ms (${result.compacted} step, ${result.deleted} objects deleted)`,
  );
  console.log(`after: ${await objects(prefix)} objects`);
  console.log(`  whole-log API read: ${await quantiles(whole)}`);
  console.log(`  64 KiB ranged read: ${await quantiles(ranged)}`);
} finally {
  await server.close();
  await minio.stop();
}
