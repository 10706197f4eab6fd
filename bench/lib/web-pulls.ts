/**
 * The files tab of a pull request of 1,000 files / 50,000 changed lines (web interface part 2):
 * its server time (first view, then warm) and, in Chromium, when its first file is shown and the
 * longest main-thread task, measured as the changeset of part 1 (`browserDiffPage`). The pull
 * request is made from the generated 1,000-file git repository of bench/web.ts: registered a
 * second time, its `main` moved back one commit and the change put on a branch `topic`.
 * Recorded in bench/README.md in a block of its own, after the part 1 section.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as prettier from 'prettier';
import { registerGenerated, type ApiCall, type ServerProcess } from './server.ts';
import { browserDiffPage, type BrowserFigures } from './web-browser.ts';

const exec = promisify(execFile);

export type PullFilesFigures = {
  url: string;
  first: number;
  warm: { p50: number; p99: number };
  requests: number;
  browser: BrowserFigures | undefined;
  /** The machine's 1-minute load average when the measurement started. */
  load: number;
};

/** A page's server time (`Server-Timing: app;dur=`), in ms. */
async function serverTime(url: string): Promise<number> {
  const r = await fetch(url, { headers: { accept: 'text/html' } });
  await r.arrayBuffer();
  if (!r.ok) throw new Error(`GET ${url}: ${r.status}`);
  return Number(/app;dur=([\d.]+)/.exec(r.headers.get('server-timing') ?? '')?.[1] ?? NaN);
}

export async function pullFilesTab(
  server: ServerProcess,
  api: ApiCall,
  bigChangeRepo: string,
  opts: { browser: boolean; requests?: number },
): Promise<PullFilesFigures> {
  const load = os.loadavg()[0] ?? 0;
  const id = await registerGenerated(server, api, 'bench', 'bigpull', 'git', bigChangeRepo);
  const store = server.storePath(id, 'git');
  const git = (args: string[]) => exec('git', ['-C', store, ...args]);
  await git(['branch', 'topic', 'main']);
  await git(['update-ref', 'refs/heads/main', 'main~1']);
  const pull = await api('POST', '/api/v1/repos/bench/bigpull/pulls', {
    title: 'Change half the lines of 1,000 files',
    source_ref: 'topic',
  });
  const url = `${server.url}/bench/bigpull/-/pulls/${pull.data.number as number}/files`;
  const first = await serverTime(url);
  const n = opts.requests ?? 30;
  for (let i = 0; i < 5; i++) await serverTime(url);
  const times: number[] = [];
  for (let i = 0; i < n; i++) times.push(await serverTime(url));
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? NaN;
  const browser = opts.browser ? await browserDiffPage(url) : undefined;
  return { url, first, warm: { p50: at(0.5), p99: at(0.99) }, requests: n, browser, load };
}

export function describePullFiles(f: PullFilesFigures): string {
  const b = f.browser;
  return (
    `pull request files tab (1,000 files): first ${f.first.toFixed(1)} ms, then p50=${f.warm.p50.toFixed(1)} p99=${f.warm.p99.toFixed(1)} ms` +
    (b === undefined
      ? ''
      : `; browser: first file ${b.firstFileMs.toFixed(0)} ms, longest task ${b.longestTaskMs.toFixed(0)} ms (${b.longTasks} over 50 ms)`)
  );
}

/** Writes the figures into bench/README.md between `bench:web-pulls` markers (after part 1's section). */
export async function recordPullFiles(f: PullFilesFigures): Promise<void> {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const b = f.browser;
  const section = `<!-- bench:web-pulls:start -->

### Pull request files tab (\`npm run bench:web\`, web interface part 2)

Goal: the files tab of a pull request of 1,000 files / 50,000 changed lines shows its first file
in under 1 s, with no main-thread task over 200 ms. The pull request is made from the 1,000-file
repository above (its change on a branch \`topic\`, into \`main\`); the page shows the list of
files, the first 20 files' diffs, and the other 980 collapsed behind "Load diff" (each loads
from a fragment of its own); with more than 50 files the list starts closed (since part 2, for
the changeset page too: the changeset figures above were taken with it open). Server time as above (\`Server-Timing\`; the first view reads and
parses the compare, later views find it parsed); the browser figures as for the changeset
(median of 3 loads). \`npm run bench:web -- --pulls-only\` measures this alone.

Recorded ${new Date().toISOString().slice(0, 10)} on ${cpu} (${os.cpus().length} CPUs), Node ${process.version}, load average ${f.load.toFixed(1)} when it started.

- Server time: first view ${f.first.toFixed(0)} ms, then p50 ${f.warm.p50.toFixed(1)} ms, p99 ${f.warm.p99.toFixed(1)} ms (${f.requests} requests).
${b === undefined ? '' : `- In Chromium ${b.version} (headless, this machine): the first file shown ${b.firstFileMs.toFixed(0)} ms after the navigation started (goal < 1 s); ${b.longTasks === 0 ? 'no main-thread task over 50 ms (the shortest a `longtask` entry reports; goal <= 200 ms)' : `the longest main-thread task ${b.longestTaskMs.toFixed(0)} ms (goal <= 200 ms), ${b.longTasks} over 50 ms`}; the whole page loaded at ${b.loadMs.toFixed(0)} ms; ${b.collapsed} of 1,000 files collapsed.`}

<!-- bench:web-pulls:end -->`;
  const file = path.join(import.meta.dirname, '..', 'README.md');
  const text = await fs.readFile(file, 'utf8');
  const re = /<!-- bench:web-pulls:start -->[\s\S]*?<!-- bench:web-pulls:end -->/;
  const updated = re.test(text)
    ? text.replace(re, section)
    : text.replace('<!-- bench:web:end -->', `<!-- bench:web:end -->\n\n${section}`);
  await fs.writeFile(file, await prettier.format(updated, { parser: 'markdown', proseWrap: 'preserve' }));
}
