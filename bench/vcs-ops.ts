/**
 * VCS operations behind pull requests on 10,000-commit repositories: a cold mergeability check
 * (`checkMerge`, no caching anywhere: every call is a full dry-run merge) of a clean and of a
 * conflicting one-commit PR, and the merge of a one-commit PR into a diverged target, for each kind.
 *
 * Repositories are generated once under bench/.work/vcs-ops/<commits> (kept between runs): git by
 * `git fast-import` (200 files of 80 lines, one line changed per commit), Fossil by
 * `fossil import --git` of it, Mercurial by `hg convert` of it (the slow one: minutes). Each run
 * works on fresh copies. Prints a Markdown table (docs/vcs-operations.md keeps the recorded one).
 *
 *   node bench/vcs-ops.ts [--commits 10000] [--iterations 50] [--merges 10] [--kinds git,hg,fossil]
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createVcs, type VcsKind } from '../src/vcs/index.ts';
import { ProcessPool } from '../src/vcs/process/pool.ts';
import type { VcsOps } from '../src/vcs/ops.ts';
import { generateHistory, prepare } from './history.ts';

const { values } = parseArgs({
  options: {
    commits: { type: 'string', default: '10000' },
    iterations: { type: 'string', default: '50' },
    merges: { type: 'string', default: '10' },
    kinds: { type: 'string', default: 'git,hg,fossil' },
  },
});
const COMMITS = Number(values.commits);
const ITERATIONS = Number(values.iterations);
const MERGES = Number(values.merges);
const STORE = path.join(import.meta.dirname, '.work', 'vcs-ops', String(COMMITS));
const BOB = { name: 'Bob', email: 'bob@example.test' };

// ------------------------------------------------------------------ measuring

/**
 * CPU milliseconds used so far by this process, its reaped children (one-shot git/fossil
 * commands) and its live children (Mercurial's command servers): a cost that, unlike wall-clock
 * time, does not grow with the machine's load. Linux /proc, 100 ticks per second.
 */
async function cpuMs(): Promise<number> {
  const fields = (stat: string) => stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const self = fields(await fs.readFile('/proc/self/stat', 'utf8'));
  // after ')': state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
  let ticks = [11, 12, 13, 14].reduce((a, i) => a + Number(self[i] ?? 0), 0);
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const f = fields(await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => ') x 0'));
    if (Number(f[1]) === process.pid) ticks += Number(f[11] ?? 0) + Number(f[12] ?? 0);
  }
  return ticks * 10;
}

type Stat = { p50: number; p99: number; first: number; cpu: number };
async function measure(fn: () => Promise<unknown>, iterations: number, warmup = 3): Promise<Stat> {
  const s0 = performance.now();
  await fn();
  const first = performance.now() - s0;
  for (let i = 1; i < warmup; i++) await fn();
  const t: number[] = [];
  const c0 = await cpuMs();
  for (let i = 0; i < iterations; i++) {
    const s = performance.now();
    await fn();
    t.push(performance.now() - s);
  }
  const cpu = ((await cpuMs()) - c0) / iterations;
  t.sort((a, b) => a - b);
  const pick = (q: number) => t[Math.min(t.length - 1, Math.floor(q * t.length))] ?? NaN;
  return { p50: pick(0.5), p99: pick(0.99), first, cpu };
}

async function benchKind(kind: VcsKind, work: string, ops: VcsOps) {
  const repo = await prepare(STORE, kind, work);
  // A clean PR (one commit) against a target one commit ahead, and a conflicting one.
  await repo.commit('feature', repo.main, 'pkg1/mod1.txt', 'feature change');
  await repo.commit('conflict', repo.main, 'pkg2/mod2.txt', 'conflicting change');
  await repo.commit(repo.main, repo.main, 'pkg2/mod2.txt', 'mainline change');
  const clean = await measure(() => ops.checkMerge(repo.srv, 'feature', repo.main), ITERATIONS);
  const conflict = await measure(() => ops.checkMerge(repo.srv, 'conflict', repo.main), ITERATIONS);
  const check = await ops.checkMerge(repo.srv, 'feature', repo.main);
  if (check.state !== 'clean') throw new Error(`${kind}: expected clean, got ${JSON.stringify(check)}`);
  const merges: number[] = [];
  let mergeCpu = 0;
  for (let i = 0; i < MERGES; i++) {
    await repo.commit(`pr${i}`, repo.main, `pkg3/mod${i % 10}.txt`, `pr ${i}`);
    await repo.commit(repo.main, repo.main, `pkg4/mod${i % 10}.txt`, `main ${i}`);
    const s = performance.now();
    const c = await cpuMs();
    const r = await ops.merge(repo.srv, { source: `pr${i}`, target: repo.main, style: 'merge', author: BOB });
    merges.push(performance.now() - s);
    mergeCpu += (await cpuMs()) - c;
    if (r.kind !== 'merged' || r.fastForward) throw new Error(`${kind}: ${JSON.stringify(r)}`);
  }
  merges.sort((a, b) => a - b);
  return {
    clean,
    conflict,
    merge: {
      p50: merges[Math.floor(merges.length / 2)] ?? NaN,
      max: merges.at(-1) ?? NaN,
      cpu: mergeCpu / MERGES,
    },
  };
}

await generateHistory(STORE, COMMITS);
const work = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-bench-ops-'));
const set = createVcs({ pool: new ProcessPool(), tmpDir: path.join(work, 'tmp') });
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    set.closeProcesses();
    void fs.rm(work, { recursive: true, force: true }).finally(() => process.exit(130));
  });
}
const ms = (n: number) => `${n.toFixed(1)} ms`;
const rows: string[] = [];
try {
  for (const kind of values.kinds.split(',') as VcsKind[]) {
    const r = await benchKind(kind, work, set.ops(kind));
    rows.push(
      `| ${kind} | ${ms(r.clean.p50)} | ${ms(r.clean.p99)} | ${ms(r.clean.cpu)} | ${ms(r.clean.first)} | ${ms(r.conflict.p50)} | ${ms(r.conflict.p99)} | ${ms(r.conflict.cpu)} | ${ms(r.merge.p50)} | ${ms(r.merge.max)} | ${ms(r.merge.cpu)} |`,
    );
    console.log(rows.at(-1));
  }
} finally {
  set.closeProcesses();
  await fs.rm(work, { recursive: true, force: true });
}
console.log(
  `\n${COMMITS} commits, ${ITERATIONS} checks per case, ${MERGES} merges; load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}\n`,
);
console.log(
  '| kind | clean check p50 | p99 | CPU/check | first call | conflict check p50 | p99 | CPU/check | merge p50 | max | CPU/merge |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) console.log(r);
