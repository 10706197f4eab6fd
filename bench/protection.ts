/**
 * What the protection rule check costs a push (issue 35: "pushes of five commits with 0 and 50
 * rules, side by side"). One `node src/cli.ts serve` process of its own (embedded PostgreSQL);
 * two repositories of `--kind` (git by default; hg and fossil where their check exists), one
 * without rules and one with 50: 46 that match nothing pushed (`team-N/**`) and four that match
 * the mainline of every kind (`main`, `@`, `trunk`, `default`; fast-forward only, members may
 * push), so the check runs in full (for git: the pre-receive hook, with a fast-forward test).
 * Each round commits five commits in each working copy and pushes them, alternating which
 * repository goes first (the machine's other load reaches both alike); the push is timed by the
 * client (`git push` / `hg push` / `fossil push`, start to exit). Printed: p50, p90 and mean per
 * repository, and the difference of the medians; for git also the check by itself (`hookAlone`),
 * which the machine's other load disturbs less than whole pushes.
 *
 *   npm run bench:protection [-- --kind git --rounds 30]
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { apiCaller, startServerProcess } from './lib/server.ts';
import { WorkingCopy } from '../test/helpers/clients.ts';
import type { VcsKind } from '../src/vcs/index.ts';

const { values } = parseArgs({
  options: {
    kind: { type: 'string', default: 'git' },
    rounds: { type: 'string', default: '30' },
  },
});
const KIND = values.kind as VcsKind;
const ROUNDS = Number(values.rounds);
if (!['git', 'hg', 'fossil'].includes(KIND)) throw new Error(`--kind: git, hg or fossil, not ${KIND}`);

const RULES = [
  ...Array.from({ length: 46 }, (_, i) => ({ pattern: `team-${i}/**` })),
  ...['main', '@', 'trunk', 'default'].map((pattern) => ({ pattern })),
].map((r) => ({ ...r, fast_forward_only: true, allow_deletion: false, push: 'members' }));

const HOOK = path.join(import.meta.dirname, '..', 'src', 'protection', 'git-pre-receive.ts');

const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/**
 * The git check by itself: the pre-receive program run as git runs it (the update of the last
 * round's five commits on main, 50 rules, a fast-forward test), with and without Node's compile
 * cache (the server runs it with one), 30 times each, in the repository the server holds.
 */
async function hookAlone(gitDir: string, work: string): Promise<void> {
  const rev = (r: string) => execFileSync('git', ['-C', work, 'rev-parse', r], { encoding: 'utf8' }).trim();
  const input = `${rev('HEAD~5')} ${rev('HEAD')} refs/heads/main\n`;
  const protection = JSON.stringify({ rules: RULES, pusher: { username: 'admin', role: 'owner' } });
  const cacheDir = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-bench-hook-cache-'));
  try {
    for (const [label, cache] of [
      ['without a compile cache', {}],
      ['with a compile cache', { NODE_COMPILE_CACHE: cacheDir }],
    ] as const) {
      const times: number[] = [];
      for (let i = 0; i < 31; i++) {
        const t0 = performance.now();
        execFileSync(process.execPath, ['--no-warnings', HOOK], {
          input,
          env: { PATH: process.env.PATH, GIT_DIR: gitDir, TRIAD_PROTECTION: protection, ...cache },
        });
        if (i > 0) times.push(performance.now() - t0); // the first run fills the cache
      }
      console.log(
        `git pre-receive check alone, ${label}: p50 ${quantile(times, 0.5).toFixed(1)} ms, p90 ${quantile(times, 0.9).toFixed(1)} ms`,
      );
    }
  } finally {
    await fs.rm(cacheDir, { recursive: true, force: true });
  }
}

const s = await startServerProcess('protection');
try {
  const call = apiCaller(s.url, s.token);
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  const repos: { name: string; w: WorkingCopy; times: number[] }[] = [];
  const ids = new Map<string, number>();
  for (const [name, rules] of [
    ['zero', []],
    ['fifty', RULES],
  ] as const) {
    const r = await call('POST', '/api/v1/orgs/bench/repos', { name, vcs: KIND });
    ids.set(name, r.data.id as number);
    for (const rule of rules) await call('POST', `/api/v1/repos/bench/${name}/protections`, rule);
    const w = await WorkingCopy.clone(KIND, r.data.clone_url as string, s.token);
    await w.commit('README.md', `# ${name}\n`, 'first');
    const first = await w.push();
    if (first.code !== 0) throw new Error(`first push to ${name}: ${first.stderr}`);
    repos.push({ name, w, times: [] });
  }
  const rules = await call('GET', '/api/v1/repos/bench/fifty/protections?per_page=100');
  if (rules.pagination.total !== 50) throw new Error(`fifty has ${rules.pagination.total} rules`);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? repos : [...repos].reverse();
    for (const r of order) {
      for (let c = 1; c <= 5; c++)
        await r.w.commit(`f${c}.txt`, `round ${round} commit ${c}\n`, `r${round}c${c}`);
      const t0 = performance.now();
      const pushed = await r.w.push();
      const ms = performance.now() - t0;
      if (pushed.code !== 0) throw new Error(`push to ${r.name}: ${pushed.stderr}`);
      r.times.push(ms);
    }
  }
  console.log(`${KIND}: pushes of five commits, ${ROUNDS} rounds (client wall time, ms)`);
  console.log('rules | p50 | p90 | mean');
  for (const r of repos) {
    const n = r.name === 'zero' ? 0 : 50;
    console.log(
      `${n} | ${quantile(r.times, 0.5).toFixed(1)} | ${quantile(r.times, 0.9).toFixed(1)} | ${mean(r.times).toFixed(1)}`,
    );
  }
  const [zero, fifty] = repos;
  console.log(
    `difference of the medians: ${(quantile(fifty!.times, 0.5) - quantile(zero!.times, 0.5)).toFixed(1)} ms`,
  );
  if (KIND === 'git') await hookAlone(s.storePath(ids.get('fifty')!, 'git'), fifty!.w.dir);
} finally {
  await s.close();
}
