/**
 * Web pages' server time on 10,000-commit repositories (goal p50 <= 20 ms per page type), a
 * 10,000-line file page (<= 300 ms), and a changeset of 1,000 files / 50,000 changed lines in a
 * real browser (its first file shown in under 1 s, no main-thread task over 200 ms); then the
 * files tab of a pull request of the same 1,000 files (the same goals; bench/lib/web-pulls.ts),
 * alone with `--pulls-only`.
 *
 * Uses the repositories of bench/contents.ts (`bench/.work/contents/<commits>`: git, and the same
 * history in Fossil and Mercurial) and two git repositories of its own under `bench/.work/web`
 * (one 10,000-line TypeScript file; one commit changing 25 of 50 lines in each of 1,000 files).
 * Starts `node src/cli.ts serve` as a process of its own, registers the repositories (public)
 * and times each page type: 50 warm-up requests, then `--iterations` requests; the server time
 * is the page's own `Server-Timing: app;dur=` (from the request's arrival to the page made), the
 * client time is the whole request over a keep-alive connection. Beside each page, the native
 * tool's nearest equivalent in the same run: `hg serve` and `fossil server` HTML pages (new
 * connection per request), and for git the `git` CLI (no web server of its own).
 * The table is printed and recorded in bench/README.md (section "Web pages").
 *
 *   npm run bench:web [-- --commits 10000 --iterations 200 --no-browser --no-record --pulls-only]
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import * as prettier from 'prettier';
import { apiCaller, registerGenerated, startServerProcess } from './lib/server.ts';
import type { VcsKind } from '../src/vcs/index.ts';
import { freePort } from '../src/db/ports.ts';
import { ENV, generateRepos, pipeInto } from './repos.ts';
import { browserDiffPage, type BrowserFigures } from './lib/web-browser.ts';
import { describePullFiles, pullFilesTab, recordPullFiles } from './lib/web-pulls.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    commits: { type: 'string', default: '10000' },
    iterations: { type: 'string', default: '200' },
    'no-browser': { type: 'boolean', default: false },
    'no-record': { type: 'boolean', default: false },
    'pulls-only': { type: 'boolean', default: false },
  },
});
const COMMITS = Number(values.commits);
const PULLS_ONLY = values['pulls-only'];
const ITERATIONS = Number(values.iterations);
const WARMUP = 50;
const CONTENTS = path.join(import.meta.dirname, '.work', 'contents', String(COMMITS));
const WORK = path.join(import.meta.dirname, '.work', 'web');
const run = async (cmd: string, args: string[], cwd = WORK): Promise<string> =>
  (await exec(cmd, args, { cwd, env: ENV, maxBuffer: 512 * 1024 * 1024 })).stdout;

// ------------------------------------------------------------------ the extra repositories

/** A fast-import stream of one commit with `files` (path -> text), on top of `from` when given. */
function commit(mark: number, files: Map<string, string>, message: string, from?: number): Buffer {
  const data = (s: string) => `data ${Buffer.byteLength(s)}\n${s}\n`;
  const t = 1_700_000_000 + mark * 60;
  let out = `commit refs/heads/main\nmark :${mark}\nauthor Bench <bench@example.test> ${t} +0000\n`;
  out += `committer Bench <bench@example.test> ${t} +0000\n${data(message)}`;
  if (from !== undefined) out += `from :${from}\n`;
  for (const [p, text] of files) out += `M 100644 inline ${p}\n${data(text)}`;
  return Buffer.from(out);
}

/** A TypeScript-looking file of `n` lines (functions, comments, strings: what highlighting sees). */
function tsFile(n: number): string {
  const lines: string[] = [];
  for (let i = 0; lines.length < n; i++) {
    lines.push(`/** Computes value ${i} from its inputs (a comment the highlighter colours). */`);
    lines.push(`export function compute${i}(a: number, b: string): { total: number; label: string } {`);
    lines.push(`  const total = a * ${i} + b.length; // ${i % 7 === 0 ? 'TODO: check' : 'fine'}`);
    lines.push(`  return { total, label: \`item-${i}-\${b}\` };`);
    lines.push('}');
  }
  return `${lines.slice(0, n).join('\n')}\n`;
}

async function gitRepo(name: string, stream: Buffer[]): Promise<string> {
  const dir = path.join(WORK, `${name}.git`);
  if (existsSync(path.join(dir, 'done'))) return dir;
  await fs.rm(dir, { recursive: true, force: true });
  await fs.mkdir(WORK, { recursive: true });
  await run('git', ['init', '-q', '--bare', '-b', 'main', dir]);
  await pipeInto(
    spawn('git', ['-C', dir, 'fast-import', '--quiet'], { env: ENV, stdio: ['pipe', 'inherit', 'inherit'] }),
    stream,
  );
  await fs.writeFile(path.join(dir, 'done'), '');
  return dir;
}

function bigChangeStream(): Buffer[] {
  const before = new Map<string, string>();
  const after = new Map<string, string>();
  for (let f = 0; f < 1000; f++) {
    const p = `area${Math.floor(f / 50)}/file${f}.txt`;
    const lines = Array.from({ length: 50 }, (_, i) => `file ${f} line ${i} the original text of this line`);
    before.set(p, `${lines.join('\n')}\n`);
    // 25 of the 50 lines change: 25 removed and 25 added lines per file, 50,000 in all
    after.set(p, `${lines.map((l, i) => (i % 2 === 0 ? `${l} (changed)` : l)).join('\n')}\n`);
  }
  return [
    commit(1, before, 'one thousand files\n'),
    commit(2, after, 'change half the lines of 1,000 files\n', 1),
  ];
}

// ------------------------------------------------------------------ measuring

type Stat = { p50: number; p99: number };
const stat = (t: number[]): Stat => {
  const s = [...t].sort((a, b) => a - b);
  const pick = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
  return { p50: pick(0.5), p99: pick(0.99) };
};

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** GETs a page; answers its server time (Server-Timing) and the client's whole time, in ms. */
function page(url: string, fresh = false): Promise<{ server: number; client: number }> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(
      url,
      {
        agent: fresh ? false : keepAlive,
        headers: { accept: 'text/html', ...(fresh ? { connection: 'close' } : {}) },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          if ((res.statusCode ?? 500) >= 400) {
            reject(new Error(`GET ${url}: ${res.statusCode}`));
            return;
          }
          const timing = /app;dur=([\d.]+)/.exec(String(res.headers['server-timing'] ?? ''));
          resolve({ server: timing === null ? NaN : Number(timing[1]), client: performance.now() - start });
        });
      },
    );
    req.on('error', reject);
  });
}

async function measure(fn: (i: number) => Promise<{ server: number; client: number }>, n = ITERATIONS) {
  for (let i = 0; i < WARMUP; i++) await fn(i);
  const server: number[] = [];
  const client: number[] = [];
  for (let i = 0; i < n; i++) {
    // (measured calls get indices of their own: a case reading distinct items reads new ones)
    const r = await fn(WARMUP + i);
    server.push(r.server);
    client.push(r.client);
  }
  return { server: stat(server), client: stat(client) };
}

/** The native side: a command or a request timed as a whole. */
async function measureNative(
  fn: (i: number) => Promise<unknown>,
  n = Math.min(ITERATIONS, 100),
): Promise<Stat> {
  for (let i = 0; i < 20; i++) await fn(i);
  const t: number[] = [];
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    await fn(i);
    t.push(performance.now() - s);
  }
  return stat(t);
}

const children: ChildProcess[] = [];
function serve(cmd: string, args: string[]): void {
  children.push(spawn(cmd, args, { env: ENV, stdio: 'ignore' }));
}
async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (
      await page(url, true).then(
        () => true,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

// ------------------------------------------------------------------ main

type Row = { what: string; vcs: string; server: Stat; client: Stat; native?: Stat; nativeWhat?: string };
const rows: Row[] = [];
let bigFile: { first: number; warm: Stat } | undefined;
let bigChange: { server: Stat; first: number } | undefined;
let browser: BrowserFigures | undefined;

const bigChangeRepo = await gitRepo('big-change', bigChangeStream());
const server = await startServerProcess('web');
const base = server.url;
const api = apiCaller(base, server.token);

try {
  await api('POST', '/api/v1/orgs', { name: 'bench' });
  if (!PULLS_ONLY) await partOne();
  const pulls = await pullFilesTab(server, api, bigChangeRepo, { browser: !values['no-browser'] });
  console.log(describePullFiles(pulls));
  if (!values['no-record']) {
    if (!PULLS_ONLY) await record();
    await recordPullFiles(pulls);
    console.log('recorded in bench/README.md');
  }
} finally {
  for (const c of children) c.kill();
  keepAlive.destroy();
  await server.close();
}

/** Part 1's pages: every page type on the three kinds, the big file, the big changeset. */
async function partOne(): Promise<void> {
  const repos = await generateRepos(CONTENTS, COMMITS);
  const bigFileRepo = await gitRepo('big-file', [
    commit(
      1,
      new Map([
        ['src/big.ts', tsFile(10_000)],
        ['README.md', '# big file\n'],
      ]),
      'a 10,000-line file\n',
    ),
  ]);
  const line = (r: Row) =>
    console.log(
      `${r.vcs.padEnd(7)} ${r.what.padEnd(34)} server p50=${r.server.p50.toFixed(2)} p99=${r.server.p99.toFixed(2)} ms` +
        `  client p50=${r.client.p50.toFixed(2)} ms` +
        (r.native === undefined
          ? ''
          : `   native p50=${r.native.p50.toFixed(2)} p99=${r.native.p99.toFixed(2)} ms`),
    );

  const names: Record<VcsKind, string> = { git: 'g', hg: 'h', fossil: 'f' };
  const register = (name: string, vcs: VcsKind, from: string) =>
    registerGenerated(server, api, 'bench', name, vcs, from);
  for (const vcs of ['git', 'hg', 'fossil'] as const) await register(names[vcs], vcs, repos[vcs]);
  await register('bigfile', 'git', bigFileRepo);
  await register('bigchange', 'git', bigChangeRepo);

  const hgPort = await freePort();
  const fossilPort = await freePort();
  serve('/usr/bin/hg', ['serve', '-R', repos.hg, '-p', String(hgPort), '-a', '127.0.0.1']);
  serve('fossil', ['server', '--port', String(fossilPort), '--localhost', repos.fossil]);
  const hgUrl = `http://127.0.0.1:${hgPort}`;
  const fossilUrl = `http://127.0.0.1:${fossilPort}`;
  await waitFor(`${hgUrl}/`);
  await waitFor(`${fossilUrl}/timeline`);

  // global pages
  for (const [what, p] of [
    ['start page (anonymous)', '/'],
    ['explore', '/-/explore'],
    ['organization', '/bench'],
    ['sign-in form', '/-/login'],
  ] as const) {
    const r = { what, vcs: '-', ...(await measure(() => page(`${base}${p}`))) };
    rows.push(r);
    line(r);
  }

  const g = (args: string[]) => run('git', ['-C', repos.git, ...args]);
  for (const vcs of ['git', 'hg', 'fossil'] as const) {
    const rb = `${base}/bench/${names[vcs]}`;
    const rev = vcs === 'git' ? 'main' : vcs === 'hg' ? 'default' : 'trunk';
    const logPage = async (n: number) =>
      (
        JSON.parse(
          await new Promise<string>((resolve, reject) =>
            http.get(`${base}/api/v1/repos/bench/${names[vcs]}/log?per_page=100&page=${n}`, (res) => {
              let t = '';
              res.on('data', (c: Buffer) => (t += c.toString()));
              res.on('end', () => resolve(t));
              res.on('error', reject);
            }),
          ),
        ) as { data: { id: string }[] }
      ).data.map((e) => e.id);
    // more distinct commits than requests: every changeset page is a first view
    const ids = [...(await logPage(2)), ...(await logPage(3)), ...(await logPage(4))];
    const at = (i: number) => ids[i % ids.length] ?? '';
    const native = (hg: string, fossil: string, git: string[] | undefined) =>
      vcs === 'hg'
        ? { native: () => page(`${hgUrl}${hg}`, true), nativeWhat: `hg serve \`${hg}\`` }
        : vcs === 'fossil'
          ? { native: () => page(`${fossilUrl}${fossil}`, true), nativeWhat: `fossil server \`${fossil}\`` }
          : git === undefined
            ? {}
            : { native: () => g(git), nativeWhat: `\`git ${git.join(' ')}\`` };
    const cases: {
      what: string;
      url: (i: number) => string;
      native?: (i: number) => Promise<unknown>;
      nativeWhat?: string;
    }[] = [
      { what: 'repository home', url: () => rb, ...native('/', '/home', ['ls-tree', '-l', 'HEAD']) },
      {
        what: 'directory (pkg3)',
        url: () => `${rb}/-/tree/${rev}/pkg3`,
        ...native('/file/tip/pkg3', `/dir?ci=tip&name=pkg3`, ['ls-tree', '-l', 'HEAD', 'pkg3/']),
      },
      {
        what: 'file (pkg3/mod4.txt)',
        url: () => `${rb}/-/blob/${rev}/pkg3/mod4.txt`,
        ...native('/file/tip/pkg3/mod4.txt', '/file?name=pkg3/mod4.txt&ci=tip', [
          'show',
          'HEAD:pkg3/mod4.txt',
        ]),
      },
      {
        what: 'history, first page',
        url: () => `${rb}/-/log/${rev}`,
        ...native('/log?revcount=50', '/timeline?n=50&y=ci', ['log', '-50', '--format=%H %an %aI %s']),
      },
      { what: 'history, page 100', url: () => `${rb}/-/log/${rev}?page=100` },
      {
        what: 'changeset (each a first view)',
        url: (i) => `${rb}/-/changeset/${at(i)}`,
        ...(vcs === 'git'
          ? { native: (i: number) => g(['show', at(i)]), nativeWhat: '`git show <id>`' }
          : vcs === 'hg'
            ? {
                native: (i: number) => page(`${hgUrl}/rev/${at(i)}`, true),
                nativeWhat: 'hg serve `/rev/<id>`',
              }
            : {
                native: (i: number) => page(`${fossilUrl}/info/${at(i)}`, true),
                nativeWhat: 'fossil server `/info/<id>`',
              }),
      },
      {
        what: 'branches and tags',
        url: () => `${rb}/-/refs`,
        ...native('/tags', '/taglist', ['for-each-ref', 'refs/tags', 'refs/heads']),
      },
    ];
    for (const c of cases) {
      const measured = await measure((i) => page(c.url(i)));
      const r: Row = { what: c.what, vcs, ...measured };
      if (c.native !== undefined) {
        r.native = await measureNative(c.native);
        r.nativeWhat = c.nativeWhat ?? '';
      }
      rows.push(r);
      line(r);
    }
  }

  // a 10,000-line file: its first view highlights it (then cached by content)
  const big = `${base}/bench/bigfile/-/blob/main/src/big.ts`;
  const first = (await page(big)).server;
  bigFile = { first, warm: (await measure(() => page(big), 50)).server };
  console.log(
    `10,000-line file: first view ${first.toFixed(1)} ms, then p50=${bigFile.warm.p50.toFixed(1)} p99=${bigFile.warm.p99.toFixed(1)} ms`,
  );

  // a changeset of 1,000 files / 50,000 changed lines
  const headId = (await run('git', ['-C', bigChangeRepo, 'rev-parse', 'main'])).trim();
  const change = `${base}/bench/bigchange/-/changeset/${headId}`;
  const cold = (await page(change)).server;
  bigChange = { first: cold, server: (await measure(() => page(change), 30)).server };
  console.log(
    `1,000-file changeset: first ${cold.toFixed(1)} ms, then p50=${bigChange.server.p50.toFixed(1)} p99=${bigChange.server.p99.toFixed(1)} ms`,
  );
  if (!values['no-browser']) {
    browser = await browserDiffPage(change);
    console.log(
      `browser: first file shown ${browser.firstFileMs.toFixed(0)} ms after navigation start, longest main-thread task ${browser.longestTaskMs.toFixed(0)} ms (${browser.longTasks} over 50 ms)`,
    );
  }
}

async function record(): Promise<void> {
  const f = (n: number) => (Number.isNaN(n) ? '' : n.toFixed(2));
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const table = [
    '| VCS | Page | Server p50 (ms) | Server p99 (ms) | Client p50 (ms) | Native p50 (ms) | Native p99 (ms) | Native |',
    '| --- | --- | --: | --: | --: | --: | --: | --- |',
    ...rows.map(
      (r) =>
        `| ${r.vcs} | ${r.what} | ${f(r.server.p50)} | ${f(r.server.p99)} | ${f(r.client.p50)} | ${r.native === undefined ? '' : f(r.native.p50)} | ${r.native === undefined ? '' : f(r.native.p99)} | ${r.nativeWhat ?? ''} |`,
    ),
  ].join('\n');
  const extra = [
    bigFile === undefined
      ? ''
      : `- A 10,000-line TypeScript file (\`src/big.ts\`, 502 KiB, just under the highlighting cap): first view ${bigFile.first.toFixed(0)} ms server time (the page waits 150 ms for the highlighting thread, then shows the file plain; the thread's lines are kept by content), later views, highlighted, p50 ${bigFile.warm.p50.toFixed(1)} ms, p99 ${bigFile.warm.p99.toFixed(1)} ms (goal <= 300 ms).`,
    bigChange === undefined
      ? ''
      : `- A changeset of 1,000 files / 50,000 changed lines: first view ${bigChange.first.toFixed(0)} ms server time, later p50 ${bigChange.server.p50.toFixed(1)} ms, p99 ${bigChange.server.p99.toFixed(1)} ms.`,
    browser === undefined
      ? ''
      : `- In Chromium ${browser.version} (headless, this machine): its first file shown ${browser.firstFileMs.toFixed(0)} ms after the navigation started (goal < 1 s); the longest main-thread task ${browser.longestTaskMs.toFixed(0)} ms (goal <= 200 ms), ${browser.longTasks} tasks over 50 ms; the whole page loaded at ${browser.loadMs.toFixed(0)} ms; ${browser.collapsed} of 1,000 files collapsed behind "Load diff".`,
  ]
    .filter((x) => x !== '')
    .join('\n');
  const section = `<!-- bench:web:start -->

## Web pages (\`npm run bench:web\`)

Goals (web interface part 1): server time of each page type p50 <= 20 ms on the 10,000-commit
repositories; a 10,000-line file page <= 300 ms server time; a changeset of 1,000 files / 50,000
lines shows its first file in under 1 s with no main-thread task over 200 ms. \`bench/web.ts\`
uses the repositories of the contents benchmark (one history in git, Mercurial and Fossil), two
git repositories of its own (a 10,000-line file; 1,000 files with half their lines changed), and
a server process of its own. Each page: ${WARMUP} warm-up requests, then ${ITERATIONS} (anonymous,
public repositories, keep-alive); "server" is the page's \`Server-Timing: app;dur=\` (request
arrival to page made: authorization, the repository lookup, the reads, the HTML), "client" the
whole request. Native: the nearest page of \`hg serve\` and \`fossil server\` (new connection per
request), and for git the CLI command printing the same data (git has no web server of its
own). The browser figures come from Chromium driven by playwright-core (median of 3 loads): the
second animation frame after the first file's block is in the document (it has been painted),
and the longest task of a \`longtask\` observer from the navigation to the load event plus one
second.

Recorded ${new Date().toISOString().slice(0, 10)} on ${cpu} (${os.cpus().length} CPUs), Node ${process.version}, ${COMMITS} commits per repository.

${table}

${extra}

<!-- bench:web:end -->`;
  const file = path.join(import.meta.dirname, 'README.md');
  const text = await fs.readFile(file, 'utf8');
  const re = /<!-- bench:web:start -->[\s\S]*?<!-- bench:web:end -->/;
  const updated = re.test(text) ? text.replace(re, section) : `${text.trimEnd()}\n\n${section}\n`;
  await fs.writeFile(file, await prettier.format(updated, { parser: 'markdown', proseWrap: 'preserve' }));
}
