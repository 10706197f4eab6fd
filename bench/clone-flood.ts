/**
 * Issue 17 goal "200 anonymous hg clones in flight: API p99 <= 50 ms and no request stalled".
 * Starts a server (bench/lib/server.ts, default transport settings unless overridden in the
 * environment), fills a public Mercurial repository with the first `--commits` commits of the
 * generated history (bench/repos.ts), then launches `--clones` anonymous `hg clone` processes at
 * once while an anonymous `GET /api/v1/repos/bench/flood` is sent every `--interval` ms (each on
 * its own, so a slow answer does not delay the next sample). Reports the API latency p50/p99/max,
 * how many API requests took over 1 s, and how the clones ended (succeeded, refused with 503,
 * other error).
 *
 *   npm run bench:clone-flood [-- --clones 200] [--commits 300] [--interval 50]
 */
import { spawn } from 'node:child_process';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { apiCaller, startBenchServer } from './lib/server.ts';
import { ENV, generateRepos } from './repos.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    clones: { type: 'string', default: '200' },
    commits: { type: 'string', default: '300' },
    interval: { type: 'string', default: '50' },
    source: { type: 'string', default: '3000' },
  },
});
const CLONES = Number(values.clones);
const COMMITS = Number(values.commits);
const INTERVAL = Number(values.interval);
const HG = '/usr/bin/hg';
const WORK = path.join(import.meta.dirname, '.work', 'contents', values.source);

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

const repos = await generateRepos(WORK, Number(values.source));
const server = await startBenchServer('clone-flood');
const { running, token, dir } = server;
const call = apiCaller(running.url, token);
try {
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  const created = await call('POST', '/api/v1/orgs/bench/repos', { name: 'flood', vcs: 'hg' });
  const store = running.services.repos.path({ id: created.data.id as number, vcs: 'hg' });
  await exec(HG, ['push', '-q', '-r', String(COMMITS - 1), '-R', repos.hg, store], { env: ENV });
  const count = (await exec(HG, ['log', '-R', store, '-r', 'tip', '-T', '{rev}'], { env: ENV })).stdout;
  const size = (await exec('du', ['-sk', store])).stdout.split('\t')[0];
  console.log(`public hg repository: ${Number(count) + 1} commits, ${size} KiB on disk`);
  const url = `${running.url}/bench/flood`;
  const apiPath = `${running.url}/api/v1/repos/bench/flood`;

  // API sampler: one anonymous request every INTERVAL ms, each timed on its own.
  const latencies: number[] = [];
  let apiErrors = 0;
  const inflight = new Set<Promise<void>>();
  const sample = () => {
    const t = performance.now();
    const p = fetch(apiPath, { signal: AbortSignal.timeout(60_000) })
      .then(async (r) => {
        await r.arrayBuffer();
        if (r.status !== 200) apiErrors++;
        latencies.push(performance.now() - t);
      })
      .catch(() => {
        apiErrors++;
        latencies.push(performance.now() - t);
      })
      .finally(() => inflight.delete(p));
    inflight.add(p);
  };
  // Warm: a few requests before the flood (not counted).
  for (let i = 0; i < 20; i++) await fetch(apiPath).then((r) => r.arrayBuffer());
  const baseline: number[] = [];
  for (let i = 0; i < 40; i++) {
    const t = performance.now();
    await fetch(apiPath).then((r) => r.arrayBuffer());
    baseline.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, INTERVAL));
  }

  const load0 = os.loadavg();
  // The server runs in this process: its event-loop delay and CPU time during the flood tell a
  // blocked or busy server from one starved of CPU by the clone processes.
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const cpu0 = process.cpuUsage();
  const timer = setInterval(sample, INTERVAL);
  const cloneRoot = path.join(dir, 'clones');
  await fs.mkdir(cloneRoot);
  type Outcome = { ok: boolean; refused: boolean; seconds: number; err: string };
  const t0 = performance.now();
  const outcomes = await Promise.all(
    Array.from(
      { length: CLONES },
      (_, i) =>
        new Promise<Outcome>((resolve) => {
          const t = performance.now();
          const child = spawn(HG, ['clone', '-U', '-q', url, path.join(cloneRoot, `c${i}`)], {
            env: ENV,
            stdio: ['ignore', 'ignore', 'pipe'],
          });
          let err = '';
          child.stderr.on('data', (d: Buffer) => (err += d.toString()));
          child.on('close', (code) =>
            resolve({
              ok: code === 0,
              refused: /\b503\b/.test(err),
              seconds: (performance.now() - t) / 1000,
              err: err.trim().split('\n').pop() ?? '',
            }),
          );
        }),
    ),
  );
  const flood = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  loop.disable();
  await new Promise((r) => setTimeout(r, 1000));
  clearInterval(timer);
  await Promise.all(inflight);
  const load1 = os.loadavg();

  const sorted = [...latencies].sort((a, b) => a - b);
  const base = [...baseline].sort((a, b) => a - b);
  const ok = outcomes.filter((o) => o.ok);
  const refused = outcomes.filter((o) => !o.ok && o.refused);
  const other = outcomes.filter((o) => !o.ok && !o.refused);
  const okTimes = ok.map((o) => o.seconds).sort((a, b) => a - b);
  const f = (n: number) => n.toFixed(1);
  console.log(`clones: ${CLONES} launched at once; flood lasted ${flood.toFixed(1)} s`);
  console.log(
    `  succeeded ${ok.length} (p50 ${pct(okTimes, 50)?.toFixed(2)} s, max ${okTimes.at(-1)?.toFixed(2)} s), ` +
      `503 ${refused.length}, other failures ${other.length}`,
  );
  for (const e of new Set(other.map((o) => o.err)).values()) console.log(`  other: ${e}`);
  if (refused[0]) console.log(`  503 message: ${refused[0].err}`);
  console.log(
    `API idle (${base.length} sequential): p50 ${f(pct(base, 50))} ms, p99 ${f(pct(base, 99))} ms, max ${f(base.at(-1) ?? NaN)} ms`,
  );
  console.log(
    `API during flood (${sorted.length} requests, one every ${INTERVAL} ms): p50 ${f(pct(sorted, 50))} ms, ` +
      `p99 ${f(pct(sorted, 99))} ms, max ${f(sorted.at(-1) ?? NaN)} ms, > 1 s: ${sorted.filter((x) => x > 1000).length}, ` +
      `errors ${apiErrors}`,
  );
  console.log(
    `server process during the flood: CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s of ${flood.toFixed(1)} s, ` +
      `event-loop delay p50 ${(loop.percentile(50) / 1e6).toFixed(0)} ms, p99 ${(loop.percentile(99) / 1e6).toFixed(0)} ms, ` +
      `max ${(loop.max / 1e6).toFixed(0)} ms`,
  );
  console.log(
    `load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}; ` +
      `${os.cpus().length} CPUs`,
  );
} finally {
  await server.close();
}
