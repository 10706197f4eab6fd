/**
 * API throughput under load (performance issue: at 200 connections, at least 60% of a bare
 * `node:http` server doing the same SQL, on the issue list and on a contents read; memory back
 * within 20% of its starting level 60 s after the load).
 *
 * Triad runs as `node src/cli.ts serve` in its own process with the settings the product starts
 * with (embedded PostgreSQL in a temporary data directory; only request logging, the embedded
 * agent and the log level are turned down). The bench creates a public git repository with five
 * commits (pushed over HTTP) and `--issues` issues through the API. The bare server
 * (`bench/lib/bare-load.ts`) is a second process on the same PostgreSQL that answers the same two
 * reads with the same statements and the same pooled VCS reader, without the framework. For each
 * read and number of connections, autocannon (a devDependency, its own process) runs
 * `--seconds` against Triad and then against the bare server. Printed: requests per second,
 * p50/p99 latency, errors, and the CPU time the serving process spent per request (from
 * /proc/<pid>/stat: independent of how busy the machine is), then Triad's memory (RSS, and the
 * V8 heap and external memory from its /metrics) at rest after the setup, after a short warm-up
 * round, right after the load, and every 10 s for `--settle` seconds, with no forced garbage
 * collection.
 *
 *   npm run bench:load [-- --seconds 5 --issues 300 --settle 60 --reads issues,blob --connections 50,200]
 *   npm run bench:load -- --server-args="--cpu-prof --cpu-prof-dir=/tmp/prof"   (profile Triad)
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs, promisify } from 'node:util';
import pino from 'pino';
import { embeddedDatabaseForCli } from '../src/db/datadir.ts';
import { apiCaller, startServerProcess } from './lib/server.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    issues: { type: 'string', default: '300' },
    settle: { type: 'string', default: '60' },
    connections: { type: 'string', default: '50,200' },
    /** Which reads to run: `issues`, `blob` or both. */
    reads: { type: 'string', default: 'issues,blob' },
    /** Extra node options for the Triad process (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`). */
    'server-args': { type: 'string', default: '' },
    /** Extra environment of the Triad process, `KEY=value` (repeatable). */
    env: { type: 'string', multiple: true, default: [] },
  },
});
const ROOT = path.join(import.meta.dirname, '..');
const AUTOCANNON = path.join(ROOT, 'node_modules', '.bin', 'autocannon');
const server = await startServerProcess(
  'load',
  Object.fromEntries(values.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
  values['server-args'].split(' ').filter((a) => a !== ''),
);
const { token, dataDir, dir } = server;
const triad = server.child;
const base = server.url;
let bare: ReturnType<typeof spawn> | undefined;
const stop = async (p: ReturnType<typeof spawn> | undefined) => {
  if (p === undefined || p.exitCode !== null) return;
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  await exited;
};

/** CPU seconds (user + system) process `pid` used so far. */
async function cpu(pid: number): Promise<number> {
  const stat = (await fs.readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(stat[11]) + Number(stat[12])) / 100; // utime, stime in clock ticks (100/s)
}
/** Triad's memory in MB: RSS (from /proc), V8 heap used and total, external (from /metrics). */
async function memory(): Promise<
  Record<'rss' | 'heapUsed' | 'heapTotal' | 'external' | 'newSpace' | 'oldSpace', number>
> {
  const status = await fs.readFile(`/proc/${triad.pid}/status`, 'utf8');
  const text = await (await fetch(`${base}/metrics`)).text();
  const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
  return {
    rss: mb(Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024),
    heapUsed: mb(metric('triad_nodejs_heap_size_used_bytes')),
    heapTotal: mb(metric('triad_nodejs_heap_size_total_bytes')),
    external: mb(metric('triad_nodejs_external_memory_bytes')),
    newSpace: mb(metric('triad_nodejs_heap_space_size_total_bytes\\{space="new"\\}')),
    oldSpace: mb(metric('triad_nodejs_heap_space_size_total_bytes\\{space="old"\\}')),
  };
}
const show = (m: Awaited<ReturnType<typeof memory>>) =>
  `RSS ${m.rss} MB (V8 heap ${m.heapUsed} used / ${m.heapTotal} total, of which new space ${m.newSpace} and old space ${m.oldSpace}; external ${m.external})`;

type Result = {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
  errors: number;
  non2xx: number;
};
async function cannon(url: string, connections: number, pid: number) {
  const before = await cpu(pid);
  const out = await exec(AUTOCANNON, ['-j', '-c', String(connections), '-d', values.seconds, url], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const r = JSON.parse(out.stdout) as Result;
  const cpuMs = ((await cpu(pid)) - before) * 1000;
  return { ...r, cpuPerRequest: r.requests.total > 0 ? cpuMs / r.requests.total : NaN };
}

try {
  const call = apiCaller(base, token);
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  const repo = (await call('POST', '/api/v1/orgs/bench/repos', { name: 'load', vcs: 'git' })).data as {
    id: number;
  };
  const work = path.join(dir, 'work');
  const git = (...a: string[]) => exec('git', ['-C', work, ...a]);
  await exec('git', ['init', '-q', '-b', 'main', work]);
  for (let i = 1; i <= 5; i++) {
    await fs.writeFile(path.join(work, 'README.md'), `# load\n\nrevision ${i}\n`);
    await git('add', '.');
    await git('-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '-m', `c${i}`);
  }
  const push = new URL(`${base}/bench/load`);
  push.username = 'x';
  push.password = token;
  await git('push', '-q', push.toString(), 'main');
  for (let i = 1; i <= Number(values.issues); i++) {
    await call('POST', '/api/v1/repos/bench/load/issues', {
      title: `issue ${i}`,
      body: `body of issue ${i}`,
    });
  }

  const db = await embeddedDatabaseForCli(dataDir, 'bench load', pino({ level: 'warn' }));
  bare = spawn(process.execPath, ['bench/lib/bare-load.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      BARE_DATABASE_URL: db.url,
      BARE_STORE: server.storePath(repo.id, 'git'),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let barePort = 0;
  for await (const line of createInterface({ input: bare.stdout! })) {
    const m = /^listening (\d+)$/.exec(line);
    if (m !== null) {
      barePort = Number(m[1]);
      break;
    }
  }
  if (barePort === 0) throw new Error('the bare server did not start');
  const bareUrl = `http://127.0.0.1:${barePort}`;

  const cases = [
    {
      key: 'issues',
      name: 'issue list (state=all, page of 30)',
      triad: '/api/v1/repos/bench/load/issues?state=all',
      bare: '/issues',
    },
    {
      key: 'blob',
      name: 'contents read (blob)',
      triad: '/api/v1/repos/bench/load/blob/README.md',
      bare: '/blob',
    },
  ].filter((c) => values.reads.split(',').includes(c.key));
  // Memory at rest after the setup, then after one short round (code compiled once, pools opened).
  const start = await memory();
  for (const c of cases) await cannon(`${base}${c.triad}`, 10, triad.pid!);
  const warm = await memory();
  console.log(
    '| Read | Connections | Triad req/s | bare req/s | ratio | Triad p50 / p99 (ms) | bare p50 / p99 (ms) | CPU ms per request (Triad / bare) | errors or non-2xx (Triad / bare) |',
  );
  console.log('| ---- | --: | --: | --: | --: | --: | --: | --: | --: |');
  for (const c of cases) {
    for (const connections of values.connections.split(',').map(Number)) {
      const t = await cannon(`${base}${c.triad}`, connections, triad.pid!);
      const b = await cannon(`${bareUrl}${c.bare}`, connections, bare.pid!);
      console.log(
        `| ${c.name} | ${connections} | ${Math.round(t.requests.average)} | ${Math.round(b.requests.average)} | ${(t.requests.average / b.requests.average).toFixed(2)} | ${t.latency.p50} / ${t.latency.p99} | ${b.latency.p50} / ${b.latency.p99} | ${t.cpuPerRequest.toFixed(2)} / ${b.cpuPerRequest.toFixed(2)} | ${t.errors + t.non2xx} / ${b.errors + b.non2xx} |`,
      );
    }
  }
  const after = await memory();
  console.log(`\nTriad's memory at rest after the setup: ${show(start)}`);
  console.log(`after a warm-up round (10 connections): ${show(warm)}`);
  console.log(`right after the load: ${show(after)}`);
  const settle = Number(values.settle);
  for (let t = 10; t <= settle; t += 10) {
    await new Promise((r) => setTimeout(r, 10_000));
    const m = await memory();
    console.log(`${t} s later: ${show(m)}; RSS ${(m.rss / start.rss).toFixed(2)} of its level at rest`);
  }
} finally {
  await stop(bare);
  await server.close();
}
