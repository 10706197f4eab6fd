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
 * repository, and the difference of the medians.
 *
 *   npm run bench:protection [-- --kind git --rounds 30]
 */
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

const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const s = await startServerProcess('protection');
try {
  const call = apiCaller(s.url, s.token);
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  const repos: { name: string; w: WorkingCopy; times: number[] }[] = [];
  for (const [name, rules] of [
    ['zero', []],
    ['fifty', RULES],
  ] as const) {
    const r = await call('POST', '/api/v1/orgs/bench/repos', { name, vcs: KIND });
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
} finally {
  await s.close();
}
