/**
 * What tracing costs the server on the contents reads (issue 34: "server overhead of tracing on
 * the contents reads, p50 and p99, side by side with tracing off"). Two `node src/cli.ts serve`
 * processes of their own with the same data (embedded PostgreSQL each): one untraced, one with
 * `OTEL_EXPORTER_OTLP_ENDPOINT` at a loopback OTLP receiver in this process that answers every
 * export and keeps nothing (test/helpers/otlp.ts). Each gets a public git repository with a few
 * commits (pushed over HTTP). Then, for each read (a file's blob, the root tree, a log page of 30)
 * and each number of connections, autocannon (its own process) runs `--seconds` against one
 * server, then the other, alternating for `--rounds` rounds (the machine's other load reaches
 * both alike); printed: the medians over the rounds of requests per second and of p50/p99 latency,
 * the server's CPU time per request (from /proc/<pid>/stat, independent of how busy the machine
 * is), and the spans the traced server exported.
 *
 *   npm run bench:tracing [-- --seconds 5 --rounds 3 --connections 1,20]
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { apiCaller, startServerProcess, type ServerProcess } from './lib/server.ts';
import { OtlpReceiver } from '../test/helpers/otlp.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '1,20' },
  },
});
const ROOT = path.join(import.meta.dirname, '..');
const AUTOCANNON = path.join(ROOT, 'node_modules', '.bin', 'autocannon');
const ROUNDS = Number(values.rounds);
const CONNECTIONS = values.connections.split(',').map(Number);
const READS = [
  { name: 'file (blob)', path: '/api/v1/repos/bench/reads/blob/src/mod3.txt' },
  { name: 'root tree', path: '/api/v1/repos/bench/reads/tree' },
  { name: 'log page of 30', path: '/api/v1/repos/bench/reads/log?per_page=30' },
];

async function cpu(pid: number): Promise<number> {
  const stat = (await fs.readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(stat[11]) + Number(stat[12])) / 100; // utime, stime in clock ticks (100/s)
}

type Result = { rps: number; p50: number; p99: number; cpuMs: number; errors: number };
async function cannon(s: ServerProcess, url: string, connections: number): Promise<Result> {
  const before = await cpu(s.child.pid!);
  const out = await exec(AUTOCANNON, ['-j', '-c', String(connections), '-d', values.seconds, url], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const r = JSON.parse(out.stdout) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    errors: number;
    non2xx: number;
  };
  const cpuMs = ((await cpu(s.child.pid!)) - before) * 1000;
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    cpuMs: r.requests.total > 0 ? cpuMs / r.requests.total : NaN,
    errors: r.errors + r.non2xx,
  };
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
    for (const c of CONNECTIONS) {
      const got = { off: [] as Result[], on: [] as Result[] };
      // warm both (V8 compiles the hot paths during the first few hundred requests)
      await cannon(off, `${off.url}${read.path}`, c);
      await cannon(on, `${on.url}${read.path}`, c);
      for (let r = 0; r < ROUNDS; r++) {
        got.off.push(await cannon(off, `${off.url}${read.path}`, c));
        got.on.push(await cannon(on, `${on.url}${read.path}`, c));
      }
      const m = (side: Result[], k: keyof Result) => median(side.map((x) => x[k]));
      const errors = [...got.off, ...got.on].reduce((n, x) => n + x.errors, 0);
      rows.push(
        `| ${read.name} | ${c} | ${fmt(m(got.off, 'rps'), 0)} / ${fmt(m(got.on, 'rps'), 0)} | ` +
          `${fmt(m(got.off, 'p50'))} / ${fmt(m(got.on, 'p50'))} | ${fmt(m(got.off, 'p99'))} / ${fmt(m(got.on, 'p99'))} | ` +
          `${fmt(m(got.off, 'cpuMs'), 2)} / ${fmt(m(got.on, 'cpuMs'), 2)} | ${errors} |`,
      );
      console.log(rows.at(-1));
    }
  }
} finally {
  await Promise.all([off.close(), on.close()]);
  await sink.close();
}
// (after the traced server's shutdown, which exported what it still held)
console.log(
  [
    '',
    `${ROUNDS} rounds of ${values.seconds} s each, medians; off / on (tracing)`,
    '| read | connections | requests/s | p50 ms | p99 ms | server CPU ms/request | errors |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `OTLP exports received from the traced server: ${sink.exports}`,
  ].join('\n'),
);
