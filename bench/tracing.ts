/**
 * What tracing costs the server on the contents reads (issue 34: "server overhead of tracing on
 * the contents reads, p50 and p99, side by side with tracing off"). Two `node src/cli.ts serve`
 * processes of their own with the same data (embedded PostgreSQL each): one untraced, one with
 * `OTEL_EXPORTER_OTLP_ENDPOINT` at a loopback OTLP receiver in this process that answers every
 * export and keeps nothing (test/helpers/otlp.ts). Each gets a public git repository with a few
 * commits (pushed over HTTP). Then, for each read (a file's blob, the root tree, a log page of 30),
 * alternating between the servers for `--rounds` rounds (the machine's other load reaches both
 * alike), after a warm-up of each:
 * - latency: `--requests` requests one after the other on one keep-alive connection (node:http),
 *   each timed here: p50 and p99;
 * - throughput: autocannon (its own process) with `--connections` for `--seconds`: requests per
 *   second;
 * with the server's CPU time per request for both (from /proc/<pid>/stat, independent of how busy
 * the machine is). Printed: the medians over the rounds, and the exports the traced server sent.
 *
 *   npm run bench:tracing [-- --requests 1000 --seconds 5 --rounds 3 --connections 20]
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { apiCaller, startServerProcess, type ServerProcess } from './lib/server.ts';
import { OtlpReceiver } from '../test/helpers/otlp.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '20' },
  },
});
const ROOT = path.join(import.meta.dirname, '..');
const AUTOCANNON = path.join(ROOT, 'node_modules', '.bin', 'autocannon');
const ROUNDS = Number(values.rounds);
const CONNECTIONS = Number(values.connections);
const REQUESTS = Number(values.requests);
const READS = [
  { name: 'file (blob)', path: '/api/v1/repos/bench/reads/blob/src/mod3.txt' },
  { name: 'root tree', path: '/api/v1/repos/bench/reads/tree' },
  { name: 'log page of 30', path: '/api/v1/repos/bench/reads/log?per_page=30' },
];

async function cpu(pid: number): Promise<number> {
  const stat = (await fs.readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(stat[11]) + Number(stat[12])) / 100; // utime, stime in clock ticks (100/s)
}

type Result = {
  p50: number;
  p99: number;
  cpuMs: number;
  rps: number;
  throughputCpuMs: number;
  errors: number;
};

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function get(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', reject);
  });
}
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
};

/** `n` requests one after the other (one keep-alive connection), each timed. */
async function sequential(s: ServerProcess, url: string, n: number) {
  const before = await cpu(s.child.pid!);
  const times: number[] = [];
  let errors = 0;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    if ((await get(url)) !== 200) errors += 1;
    times.push(performance.now() - t);
  }
  const cpuMs = ((await cpu(s.child.pid!)) - before) * 1000;
  return { p50: pct(times, 50), p99: pct(times, 99), cpuMs: cpuMs / n, errors };
}

async function cannon(s: ServerProcess, url: string) {
  const before = await cpu(s.child.pid!);
  const out = await exec(AUTOCANNON, ['-j', '-c', String(CONNECTIONS), '-d', values.seconds, url], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const r = JSON.parse(out.stdout) as {
    requests: { average: number; total: number };
    errors: number;
    non2xx: number;
  };
  const cpuMs = ((await cpu(s.child.pid!)) - before) * 1000;
  return {
    rps: r.requests.average,
    cpuMs: r.requests.total > 0 ? cpuMs / r.requests.total : NaN,
    errors: r.errors + r.non2xx,
  };
}

async function measure(s: ServerProcess, url: string): Promise<Result> {
  const lat = await sequential(s, url, REQUESTS);
  const tp = await cannon(s, url);
  return { ...lat, rps: tp.rps, throughputCpuMs: tp.cpuMs, errors: lat.errors + tp.errors };
}

/** A public git repository `bench/reads` with 10 commits of 20 files. */
async function seed(s: ServerProcess): Promise<void> {
  const call = apiCaller(s.url, s.token);
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  await call('POST', '/api/v1/orgs/bench/repos', { name: 'reads', vcs: 'git' });
  const work = path.join(s.dir, 'work');
  const git = (...a: string[]) => exec('git', ['-C', work, ...a]);
  await exec('git', ['init', '-q', '-b', 'main', work]);
  await fs.mkdir(path.join(work, 'src'));
  for (let c = 1; c <= 10; c++) {
    for (let f = 0; f < 20; f++)
      await fs.writeFile(path.join(work, 'src', `mod${f}.txt`), `module ${f}\nrevision ${c}\n`.repeat(20));
    await fs.writeFile(path.join(work, 'README.md'), `# reads\n\nrevision ${c}\n`);
    await git('add', '.');
    await git('-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '-m', `c${c}`);
  }
  const push = new URL(`${s.url}/bench/reads`);
  push.username = 'x';
  push.password = s.token;
  await git('push', '-q', push.toString(), 'main');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;
const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

const sink = await OtlpReceiver.start();
sink.discard = true;
const rows: string[] = [];
const off = await startServerProcess('tracing-off');
const on = await startServerProcess('tracing-on', {
  OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
  OTEL_SERVICE_NAME: 'triad-bench',
  // the default batch delay (5 s); exports go to the sink during the runs
});
try {
  await Promise.all([seed(off), seed(on)]);
  for (const read of READS) {
    const got = { off: [] as Result[], on: [] as Result[] };
    // warm both (V8 compiles the hot paths during the first few hundred requests)
    await sequential(off, `${off.url}${read.path}`, 300);
    await sequential(on, `${on.url}${read.path}`, 300);
    for (let r = 0; r < ROUNDS; r++) {
      got.off.push(await measure(off, `${off.url}${read.path}`));
      got.on.push(await measure(on, `${on.url}${read.path}`));
    }
    const m = (side: Result[], k: keyof Result) => median(side.map((x) => x[k]));
    const both = (k: keyof Result, digits: number) =>
      `${fmt(m(got.off, k), digits)} / ${fmt(m(got.on, k), digits)}`;
    const errors = [...got.off, ...got.on].reduce((n, x) => n + x.errors, 0);
    rows.push(
      `| ${read.name} | ${both('p50', 2)} | ${both('p99', 2)} | ${both('cpuMs', 2)} | ${both('rps', 0)} | ` +
        `${both('throughputCpuMs', 2)} | ${errors} |`,
    );
    console.log(rows.at(-1));
  }
} finally {
  await Promise.all([off.close(), on.close()]);
  await sink.close();
}
// (after the traced server's shutdown, which exported what it still held)
console.log(
  [
    '',
    `Medians of ${ROUNDS} rounds; each: ${REQUESTS} sequential requests, then ${CONNECTIONS} connections for ${values.seconds} s. off / on (tracing)`,
    '| read | p50 ms | p99 ms | server CPU ms/request | requests/s | server CPU ms/request (load) | errors |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `OTLP exports received from the traced server: ${sink.exports}`,
  ].join('\n'),
);
