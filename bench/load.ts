/**
 * API throughput under load (performance issue: at 200 connections, at least 60% of a bare
 * `node:http` server doing the same SQL, on the issue list and on a contents read). Starts a
 * server (embedded PostgreSQL in a temporary directory), creates a public git repository with a
 * few commits and `--issues` issues through the API, then runs autocannon (a devDependency) for
 * `--seconds` per case against Triad and against a bare `node:http` server in the same process
 * that answers the same two reads without the framework: the issue list with the same statements
 * on the same database (organization and repository by name, the state counter, the page of
 * numbers, the rows), and the blob read through the same pooled VCS reader. Prints requests per
 * second, p50/p99 latency and errors, and the process's RSS before, right after, and `--settle`
 * seconds after the load.
 *
 *   npm run bench:load [-- --seconds 5 --issues 300 --settle 60]
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import pg from 'pg';
import { apiCaller, startBenchServer } from './lib/server.ts';
import { openReader } from '../src/vcs/index.ts';
import { ReaderPool } from '../src/vcs/pool.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    issues: { type: 'string', default: '300' },
    settle: { type: 'string', default: '60' },
  },
});
const AUTOCANNON = path.join(import.meta.dirname, '..', 'node_modules', '.bin', 'autocannon');

const server = await startBenchServer('load');
const { running, token, dir: tmp } = server;
const call = apiCaller(running.url, token);
const api = (p: string, body: unknown) => call('POST', p, body);
await api('/api/v1/orgs', { name: 'bench' });
const repo = (await api('/api/v1/orgs/bench/repos', { name: 'load', vcs: 'git' })).data as { id: number };
const store = running.services.repos.path({ id: repo.id, vcs: 'git' });
const work = path.join(tmp, 'work');
await exec('git', ['init', '-q', '-b', 'main', work]);
for (let i = 1; i <= 5; i++) {
  await fs.writeFile(path.join(work, 'README.md'), `# load\n\nrevision ${i}\n`);
  await exec('git', ['-C', work, 'add', '.']);
  await exec('git', ['-C', work, '-c', 'user.name=b', '-c', 'user.email=b@b', 'commit', '-q', '-m', `c${i}`]);
}
await exec('git', ['-C', work, 'push', '-q', store, 'main']);
for (let i = 1; i <= Number(values.issues); i++) {
  await api('/api/v1/repos/bench/load/issues', { title: `issue ${i}`, body: `body of issue ${i}` });
}

// The bare server: the same reads, no framework, no authentication or validation layers.
const db = new pg.Pool({ connectionString: running.orm.config.get('clientUrl'), max: 10 });
const readers = new ReaderPool(openReader);
const ISSUE = `i.id, i.repo_id, i.number, i.title, i.body, i.state, i.severity, i.author_id,
  i.label_ids, i.assignee_ids, i.comment_count, i.created_at, i.updated_at`;
const bare = http.createServer((req, res) => {
  void (async () => {
    try {
      const found = await db.query<{ id: number; is_private: boolean }>(
        `select r.id, r.is_private from repos r join orgs o on o.id = r.org_id
          where lower(o.name) = lower($1) and lower(r.name) = lower($2)`,
        ['bench', 'load'],
      );
      const r = found.rows[0]!;
      let body: unknown;
      if (req.url?.startsWith('/issues')) {
        const counts = await db.query(
          'select issues_new + issues_open + issues_closed as total from repo_counters where repo_id = $1',
          [r.id],
        );
        const nums = await db.query<{ number: number }>(
          `select i.number from issues i where i.repo_id = $1 order by i.number desc limit 30 offset 0`,
          [r.id],
        );
        const rows = await db.query(
          `select ${ISSUE} from issues i where i.repo_id = $1 and i.number = any($2::int[])`,
          [r.id, nums.rows.map((n) => n.number)],
        );
        body = { data: rows.rows, pagination: { page: 1, per_page: 30, total: counts.rows[0] } };
      } else {
        body = { data: await readers.get('git', store).blob('main', 'README.md') };
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  })();
});
await new Promise<void>((r) => bare.listen(0, '127.0.0.1', r));
const bareUrl = `http://127.0.0.1:${(bare.address() as { port: number }).port}`;

type Result = {
  requests: { average: number };
  latency: { p50: number; p99: number };
  errors: number;
  non2xx: number;
};
async function cannon(url: string, connections: number): Promise<Result> {
  const out = await exec(AUTOCANNON, ['-j', '-c', String(connections), '-d', values.seconds, url], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(out.stdout) as Result;
}
const rss = () => Math.round(process.memoryUsage().rss / 1024 / 1024);

const cases = [
  {
    name: 'issue list (state=all, page of 30)',
    triad: '/api/v1/repos/bench/load/issues?state=all',
    bare: '/issues',
  },
  { name: 'contents read (blob)', triad: '/api/v1/repos/bench/load/blob/README.md', bare: '/blob' },
];
const before = rss();
console.log(
  '| Read | Connections | Triad req/s | bare req/s | ratio | Triad p50 / p99 (ms) | bare p50 / p99 (ms) | errors or non-2xx (Triad / bare) |',
);
console.log('| ---- | --: | --: | --: | --: | --: | --: | --: |');
for (const c of cases) {
  for (const connections of [50, 200]) {
    const t = await cannon(`${running.url}${c.triad}`, connections);
    const b = await cannon(`${bareUrl}${c.bare}`, connections);
    console.log(
      `| ${c.name} | ${connections} | ${Math.round(t.requests.average)} | ${Math.round(b.requests.average)} | ${(t.requests.average / b.requests.average).toFixed(2)} | ${t.latency.p50} / ${t.latency.p99} | ${b.latency.p50} / ${b.latency.p99} | ${t.errors + t.non2xx} / ${b.errors + b.non2xx} |`,
    );
  }
}
const after = rss();
await new Promise((r) => setTimeout(r, Number(values.settle) * 1000));
globalThis.gc?.();
console.log(
  `\nRSS of the process (Triad and the bare server): ${before} MB before, ${after} MB after the load, ${rss()} MB ${values.settle} s later`,
);

bare.close();
readers.close();
await db.end();
await server.close();
