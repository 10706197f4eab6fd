/**
 * Issue 17 goal "200 anonymous hg clones in flight: API p99 <= 50 ms and no request stalled".
 * Starts a server (bench/lib/server.ts, default transport settings unless overridden in the
 * environment), fills a public Mercurial repository with the first `--commits` commits of the
 * generated history (bench/repos.ts), then launches `--clones` anonymous `hg clone` processes at
 * once. A separate process (bench/lib/sampler.ts) sends an anonymous `GET /api/v1/repos/bench/flood`
 * every `--interval` ms on a new connection with a `--timeout` ms client timeout, idle before the
 * flood and during it, so a stalled server cannot slow the sampling. Reports the API latency
 * p50/p99/max, how many API requests took over 1 s or failed, and how the clones ended (succeeded,
 * refused with 503, other error).
 *
 * The clone clients stand in for clients on other machines: they run under `nice -n
 * --client-nice` (default 19), so the server, its PostgreSQL and its backends get the CPUs first,
 * as they would with the clients elsewhere; `--client-nice 0` runs them at the server's priority
 * (all on the same 2 CPUs: the machine, not only the server, is then saturated).
 *
 *   npm run bench:clone-flood [-- --clones 200] [--commits 300] [--interval 50] [--timeout 60000]
 *                             [--client-nice 19]
 */
import { spawn } from 'node:child_process';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import type { CloneOutcome } from './lib/clone-clients.ts';
import type { SamplerResult } from './lib/sampler.ts';
import { apiCaller, startBenchServer } from './lib/server.ts';
import { ENV, generateRepos } from './repos.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    clones: { type: 'string', default: '200' },
    commits: { type: 'string', default: '300' },
    interval: { type: 'string', default: '50' },
    source: { type: 'string', default: '3000' },
    timeout: { type: 'string', default: '60000' },
    'client-nice': { type: 'string', default: '19' },
  },
});
const CLONES = Number(values.clones);
const COMMITS = Number(values.commits);
const INTERVAL = Number(values.interval);
const TIMEOUT = Number(values.timeout);
const CLIENT_NICE = Number(values['client-nice']);
const HG = '/usr/bin/hg';
const SAMPLER = path.join(import.meta.dirname, 'lib', 'sampler.ts');
const CLIENTS = path.join(import.meta.dirname, 'lib', 'clone-clients.ts');
const WORK = path.join(import.meta.dirname, '.work', 'contents', values.source);

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

type Sampled = SamplerResult & { at: number };

/** CPU seconds of a process (`own`) and of its reaped children (`reaped`), from /proc/<pid>/stat. */
async function cpuOf(
  pid: number | 'self',
): Promise<{ own: number; reaped: number; ppid: number; comm: string }> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number); // f[0] is field 3
  const tick = 100; // USER_HZ
  return {
    own: ((f[11] ?? 0) + (f[12] ?? 0)) / tick,
    reaped: ((f[13] ?? 0) + (f[14] ?? 0)) / tick,
    ppid: f[1] ?? 0,
    comm,
  };
}

/**
 * Where the CPU time goes, in seconds so far: the clone clients (children of this process, once
 * reaped), the hgweb workers (alive), the embedded PostgreSQL (its postmaster, its live backends
 * and the ones that exited), and this process (the server).
 */
async function cpuSplit(
  workers: number[],
): Promise<Record<'clients' | 'hgweb' | 'postgres' | 'server', number>> {
  const self = await cpuOf('self');
  const procs = await Promise.all(
    (await fs.readdir('/proc'))
      .filter((d) => /^\d+$/.test(d))
      .map(async (d) => ({ pid: Number(d), ...(await cpuOf(Number(d))) })),
  );
  const postmaster = procs.find((p) => p.comm === 'postgres' && p.ppid === process.pid);
  const pg = procs.filter(
    (p) =>
      p.comm === 'postgres' &&
      postmaster !== undefined &&
      (p.pid === postmaster.pid || p.ppid === postmaster.pid),
  );
  const hgweb = procs.filter((p) => workers.includes(p.pid));
  return {
    clients: self.reaped,
    hgweb: hgweb.reduce((t, p) => t + p.own + p.reaped, 0),
    postgres: pg.reduce((t, p) => t + p.own, 0) + (postmaster?.reaped ?? 0),
    server: self.own,
  };
}

/** Runs the API sampler (a separate process) while `during` runs; its samples when it is done. */
async function sampled(url: string, during: () => Promise<void>): Promise<Sampled> {
  const child = spawn(process.execPath, [SAMPLER, url, String(INTERVAL), String(TIMEOUT)], {
    stdio: ['pipe', 'pipe', 'inherit'],
    detached: true, // a session of its own, like a client on another machine
  });
  // It stands in for an API client on another machine: in a session of its own (where the kernel
  // schedules by session, it weighs as much as the server's), and, when the benchmark may raise
  // its priority (root), at niceness -10 (where it does not).
  try {
    if (child.pid !== undefined) os.setPriority(child.pid, -10);
  } catch {
    // not privileged
  }
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const at = performance.now();
  await during();
  child.stdin.end();
  await closed;
  return { ...(JSON.parse(out) as SamplerResult), at };
}

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
  // Warm: a few requests before the flood (not counted).
  for (let i = 0; i < 20; i++) await fetch(apiPath).then((r) => r.arrayBuffer());
  const baseline = await sampled(apiPath, async () => new Promise((r) => setTimeout(r, 40 * INTERVAL)));

  const load0 = os.loadavg();
  // The server runs in this process: its event-loop delay and CPU time during the flood tell a
  // blocked or busy server from one starved of CPU by the clone processes.
  const loop = monitorEventLoopDelay({ resolution: 10 });
  const cloneRoot = path.join(dir, 'clones');
  await fs.mkdir(cloneRoot);
  let flood = 0;
  let cpu = { user: 0, system: 0 };
  let outcomes: CloneOutcome[] = [];
  const split0 = await cpuSplit(running.services.transports.workerPids());
  const during = await sampled(apiPath, async () => {
    loop.enable();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const clients = spawn(process.execPath, [CLIENTS, url, cloneRoot, String(CLONES), String(CLIENT_NICE)], {
      detached: true,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    clients.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await new Promise((resolve) => clients.on('close', resolve));
    outcomes = JSON.parse(out) as CloneOutcome[];
    flood = (performance.now() - t0) / 1000;
    cpu = process.cpuUsage(cpu0);
    loop.disable();
  });
  const load1 = os.loadavg();
  const split1 = await cpuSplit(running.services.transports.workerPids());

  const ok = outcomes.filter((o) => o.ok);
  const refused = outcomes.filter((o) => !o.ok && o.refused);
  const other = outcomes.filter((o) => !o.ok && !o.refused);
  const okTimes = ok.map((o) => o.seconds).sort((a, b) => a - b);
  const f = (n: number) => n.toFixed(1);
  const line = (name: string, s: Sampled) => {
    const ms = s.samples.map((x) => x.ms).sort((a, b) => a - b);
    const errors = s.samples.filter((x) => x.status !== 200).length;
    return (
      `API ${name} (${ms.length} requests started every ${INTERVAL} ms by a separate process, ${TIMEOUT / 1000} s client timeout): ` +
      `p50 ${f(pct(ms, 50))} ms, p99 ${f(pct(ms, 99))} ms, max ${f(ms.at(-1) ?? NaN)} ms, > 1 s: ${ms.filter((x) => x > 1000).length}, ` +
      `errors/timeouts ${errors}; sampler timer late by at most ${f(s.tickLateMaxMs)} ms`
    );
  };
  console.log(
    `clones: ${CLONES} launched at once${CLIENT_NICE > 0 ? ` under nice -n ${CLIENT_NICE}` : ' (not niced)'}; flood lasted ${flood.toFixed(1)} s`,
  );
  console.log(
    `  succeeded ${ok.length} (p50 ${pct(okTimes, 50)?.toFixed(2)} s, max ${okTimes.at(-1)?.toFixed(2)} s), ` +
      `503 ${refused.length}, other failures ${other.length}`,
  );
  for (const e of new Set(other.map((o) => o.err)).values()) console.log(`  other: ${e}`);
  if (refused[0]) console.log(`  503 message: ${refused[0].err}`);
  console.log(line('idle', baseline));
  console.log(line('during the flood', during));
  console.log(
    `server process during the flood: CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s of ${flood.toFixed(1)} s, ` +
      `event-loop delay p50 ${(loop.percentile(50) / 1e6).toFixed(0)} ms, p99 ${(loop.percentile(99) / 1e6).toFixed(0)} ms, ` +
      `max ${(loop.max / 1e6).toFixed(0)} ms`,
  );
  console.log(
    `CPU time during the flood (s): ${Object.entries(split1)
      .map(([k, v]) => `${k} ${(v - split0[k as keyof typeof split0]).toFixed(1)}`)
      .join(
        ', ',
      )} (clients: the reaped clone processes and the sampler; hgweb: the live workers; server: this process)`,
  );
  console.log(
    `load average before ${load0.map((x) => x.toFixed(2)).join(' ')}, after ${load1.map((x) => x.toFixed(2)).join(' ')}; ` +
      `${os.cpus().length} CPUs`,
  );
} finally {
  await server.close();
}
