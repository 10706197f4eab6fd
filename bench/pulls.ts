/**
 * Pull requests through the HTTP API on 10,000-commit repositories (the history of
 * `bench/history.ts`, shared with `npm run bench:vcs-ops`): for each kind, the mergeability read of
 * a one-commit pull request — cold (the first read after the target moved: a full dry-run merge)
 * and cached (the same heads again) — and the merge of a one-commit pull request into a target
 * that moved since (a merge commit), through `POST .../merge`.
 *
 * Starts a server (embedded PostgreSQL in a temporary directory, or DATABASE_URL) with a large
 * check budget, so a cold read waits for its check instead of answering `checking`. Prints a
 * Markdown table; bench/README.md keeps the recorded one.
 *
 *   npm run bench:pulls [-- --commits 10000 --prs 20 --reads 5 --merges 5 --kinds git,hg,fossil]
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { apiCaller, startBenchServer } from './lib/server.ts';
import type { VcsKind } from '../src/vcs/index.ts';
import { generateHistory, prepare } from './history.ts';

const { values } = parseArgs({
  options: {
    commits: { type: 'string', default: '10000' },
    prs: { type: 'string', default: '20' },
    reads: { type: 'string', default: '5' },
    merges: { type: 'string', default: '5' },
    kinds: { type: 'string', default: 'git,hg,fossil' },
  },
});
const COMMITS = Number(values.commits);
const PRS = Number(values.prs);
const READS = Number(values.reads);
const MERGES = Math.min(Number(values.merges), PRS);
const STORE = path.join(import.meta.dirname, '.work', 'vcs-ops', String(COMMITS));

const KINDS = values.kinds.split(',') as VcsKind[];

await generateHistory(STORE, COMMITS, KINDS);
const server = await startBenchServer('pulls', {
  TRIAD_PULL_CHECK_BUDGET_MS: '600000',
});
const running = server.running;
const work = server.dir;
const token = server.token;
const api = apiCaller(running.url, token);
const timed = async (fn: () => Promise<unknown>): Promise<number> => {
  const s = performance.now();
  await fn();
  return performance.now() - s;
};
const pct = (t: number[], q: number) => {
  const s = [...t].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};
const ms = (n: number) => `${n.toFixed(1)} ms`;

async function benchKind(kind: VcsKind) {
  const created = await api('POST', '/api/v1/orgs/bench/repos', { name: kind, vcs: kind });
  await fs.mkdir(path.join(work, kind), { recursive: true });
  const repo = await prepare(STORE, kind, path.join(work, kind));
  // Triad's storage of the new repository becomes the generated one.
  const store = running.services.repos.path({ id: created.data.id as number, vcs: kind });
  await fs.rm(store, { recursive: true, force: true });
  await fs.symlink(repo.srv, store);
  const base = `/api/v1/repos/bench/${kind}/pulls`;
  for (let i = 0; i < PRS; i++) {
    await repo.commit(`pr${i}`, repo.main, `pkg${Math.floor(i / 10) % 20}/mod${i % 10}.txt`, `pr ${i}`);
    await api('POST', base, { title: `PR ${i}`, source_ref: `pr${i}`, target_ref: repo.main });
  }
  // The target moves: every pull request's first read now checks a new pair of heads.
  await repo.commit(repo.main, repo.main, 'pkg19/mod9.txt', 'mainline moved');
  const cold: number[] = [];
  const cached: number[] = [];
  for (let i = 1; i <= PRS; i++) {
    let state = '';
    cold.push(await timed(async () => (state = (await api('GET', `${base}/${i}`)).data.mergeable_state)));
    if (state !== 'clean') throw new Error(`${kind} PR ${i}: ${state}`);
    for (let k = 0; k < READS; k++) cached.push(await timed(() => api('GET', `${base}/${i}`)));
  }
  const merges: number[] = [];
  for (let i = 1; i <= MERGES; i++) {
    let commit = '';
    merges.push(
      await timed(async () => (commit = (await api('POST', `${base}/${i}/merge`, {})).data.merge_commit)),
    );
    if (commit === '') throw new Error(`${kind}: merge ${i} gave no commit`);
  }
  return { cold, cached, merges };
}

const rows: string[] = [];
try {
  await api('POST', '/api/v1/orgs', { name: 'bench' });
  for (const kind of KINDS) {
    const r = await benchKind(kind);
    rows.push(
      `| ${kind} | ${ms(pct(r.cold, 0.5))} | ${ms(pct(r.cold, 0.99))} | ${ms(pct(r.cached, 0.5))} | ${ms(pct(r.cached, 0.99))} | ${ms(pct(r.merges, 0.5))} | ${ms(Math.max(...r.merges))} |`,
    );
    console.log(rows.at(-1));
  }
} finally {
  await server.close();
}
console.log(
  `\n${COMMITS} commits, ${PRS} pull requests per kind (${PRS} cold reads, ${PRS * READS} cached), ${MERGES} merges; load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} (${os.cpus().length} CPUs)\n`,
);
console.log('| kind | cold read p50 | cold p99 | cached read p50 | cached p99 | merge p50 | merge max |');
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const r of rows) console.log(r);
