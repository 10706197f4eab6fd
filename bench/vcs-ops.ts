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
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { VcsOpsSet, type VcsKind } from '../src/vcs/index.ts';
import type { VcsOps } from '../src/vcs/ops.ts';

const exec = promisify(execFile);
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
const ENV = {
  ...process.env,
  HGPLAIN: '1',
  HGRCPATH: '',
  HGUSER: 'Bench <bench@example.test>',
  USER: 'bench',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Bench',
  GIT_AUTHOR_EMAIL: 'bench@example.test',
  GIT_COMMITTER_NAME: 'Bench',
  GIT_COMMITTER_EMAIL: 'bench@example.test',
};
const run = async (cmd: string, args: string[], cwd: string): Promise<string> =>
  (await exec(cmd, args, { cwd, env: ENV, maxBuffer: 256 * 1024 * 1024 })).stdout;
const BOB = { name: 'Bob', email: 'bob@example.test' };

// ------------------------------------------------------------------ repositories

/** Linear history on main: 200 files, then one changed line per commit (as a fast-import stream). */
function* history(n: number): Generator<string> {
  const files = Array.from({ length: 200 }, (_, k) => ({
    name: `pkg${Math.floor(k / 10)}/mod${k % 10}.txt`,
    lines: Array.from({ length: 80 }, (_, i) => `pkg${Math.floor(k / 10)} mod${k % 10} line ${i}`),
  }));
  const blob = (s: string) => `data ${Buffer.byteLength(s)}\n${s}\n`;
  for (let i = 1; i <= n; i++) {
    const t = 1_600_000_000 + i * 60;
    let c = `commit refs/heads/main\nmark :${i}\nauthor B <b@example.test> ${t} +0000\n`;
    c += `committer B <b@example.test> ${t} +0000\n${blob(`commit ${i}\n`)}`;
    if (i > 1) c += `from :${i - 1}\n`;
    const touched = i === 1 ? files : [files[(i * 7) % files.length] ?? files[0]];
    for (const f of touched) {
      if (f === undefined) continue;
      if (i > 1) f.lines[(i * 13) % f.lines.length] = `changed in ${i}`;
      c += `M 100644 inline ${f.name}\n${blob(`${f.lines.join('\n')}\n`)}`;
    }
    yield c;
  }
}

async function generate(): Promise<void> {
  await fs.mkdir(STORE, { recursive: true });
  const git = path.join(STORE, 'git.git');
  if (!existsSync(path.join(git, 'done'))) {
    await fs.rm(git, { recursive: true, force: true });
    await run('git', ['init', '-q', '--bare', '-b', 'main', git], STORE);
    const child = spawn('git', ['-C', git, 'fast-import', '--quiet'], {
      env: ENV,
      stdio: ['pipe', 'inherit', 'inherit'],
    });
    const done = new Promise<void>((resolve, reject) =>
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`fast-import ${code}`)))),
    );
    for (const chunk of history(COMMITS)) {
      if (!child.stdin.write(chunk)) await new Promise((r) => child.stdin.once('drain', r));
    }
    child.stdin.end();
    await done;
    await fs.writeFile(path.join(git, 'done'), '');
  }
  const fossil = path.join(STORE, 'repo.fossil');
  if (!existsSync(`${fossil}.done`)) {
    await fs.rm(fossil, { force: true });
    await run(
      'sh',
      ['-c', `git -C '${git}' fast-export --all | fossil import --git '${fossil}' >/dev/null`],
      STORE,
    );
    await fs.writeFile(`${fossil}.done`, '');
  }
  const hg = path.join(STORE, 'hg');
  if (!existsSync(path.join(hg, '.hg', 'done'))) {
    console.log('hg: converting the git history (a few minutes)...');
    await fs.rm(hg, { recursive: true, force: true });
    await run('/usr/bin/hg', ['--config', 'extensions.convert=', 'convert', '-q', git, hg], STORE);
    await run('/usr/bin/hg', ['bookmark', '-R', hg, '-f', '-r', 'tip', '@'], STORE);
    await fs.writeFile(path.join(hg, '.hg', 'done'), '');
  }
}

// ------------------------------------------------------------------ PR branches through the clients

type Repo = {
  kind: VcsKind;
  srv: string;
  main: string;
  /** A commit on `ref`, created from `from` (a ref), changing `file` line 1 to `text`. */
  commit(ref: string, from: string, file: string, text: string): Promise<void>;
};

async function prepare(kind: VcsKind, work: string): Promise<Repo> {
  const file = (dir: string, f: string, text: string) =>
    fs.readFile(path.join(dir, f), 'utf8').then((c) => {
      const lines = c.split('\n');
      lines[1] = text;
      return fs.writeFile(path.join(dir, f), lines.join('\n'));
    });
  if (kind === 'git') {
    const srv = path.join(work, 'git.git');
    await fs.cp(path.join(STORE, 'git.git'), srv, { recursive: true });
    const wt = path.join(work, 'git-work');
    await run('git', ['clone', '-q', '-s', srv, wt], work);
    return {
      kind,
      srv,
      main: 'main',
      async commit(ref, from, f, text) {
        await run('git', ['fetch', '-q', 'origin'], wt);
        await run('git', ['checkout', '-q', '-B', ref, `origin/${from}`], wt);
        await file(wt, f, text);
        await run('git', ['commit', '-q', '-am', `${ref}: ${text}`], wt);
        await run('git', ['push', '-q', '-f', 'origin', `HEAD:refs/heads/${ref}`], wt);
      },
    };
  }
  if (kind === 'hg') {
    const srv = path.join(work, 'hg');
    await fs.cp(path.join(STORE, 'hg'), srv, { recursive: true });
    const wt = path.join(work, 'hg-work');
    await run('/usr/bin/hg', ['clone', '-q', srv, wt], work);
    return {
      kind,
      srv,
      main: '@',
      async commit(ref, from, f, text) {
        await run('/usr/bin/hg', ['pull', '-q'], wt);
        await run('/usr/bin/hg', ['update', '-q', '-C', from], wt);
        await run('/usr/bin/hg', ['bookmark', '-f', ref], wt);
        await file(wt, f, text);
        await run('/usr/bin/hg', ['commit', '-q', '-m', `${ref}: ${text}`], wt);
        await run('/usr/bin/hg', ['push', '-q', '-f', '-B', ref], wt).catch(() => '');
      },
    };
  }
  const srv = path.join(work, 'repo.fossil');
  await fs.copyFile(path.join(STORE, 'repo.fossil'), srv);
  const wt = path.join(work, 'fossil-work');
  await fs.mkdir(wt);
  await run('fossil', ['user', 'new', 'bench', 'bench@example.test', 'x', '-R', srv], work).catch(() => '');
  await run('fossil', ['open', srv], wt);
  return {
    kind,
    srv,
    main: 'main', // `fossil import --git` keeps git's branch name
    async commit(ref, from, f, text) {
      await run('fossil', ['update', from], wt);
      await file(wt, f, text);
      await run(
        'fossil',
        [
          'commit',
          '--hash',
          '--no-warnings',
          '-m',
          `${ref}: ${text}`,
          ...(ref === from ? [] : ['--branch', ref]),
        ],
        wt,
      );
    },
  };
}

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
  const repo = await prepare(kind, work);
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

await generate();
const work = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-bench-ops-'));
const set = new VcsOpsSet({ tmpDir: path.join(work, 'tmp') });
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    set.close();
    void fs.rm(work, { recursive: true, force: true }).finally(() => process.exit(130));
  });
}
const ms = (n: number) => `${n.toFixed(1)} ms`;
const rows: string[] = [];
try {
  for (const kind of values.kinds.split(',') as VcsKind[]) {
    const r = await benchKind(kind, work, set.get(kind));
    rows.push(
      `| ${kind} | ${ms(r.clean.p50)} | ${ms(r.clean.p99)} | ${ms(r.clean.cpu)} | ${ms(r.clean.first)} | ${ms(r.conflict.p50)} | ${ms(r.conflict.p99)} | ${ms(r.conflict.cpu)} | ${ms(r.merge.p50)} | ${ms(r.merge.max)} | ${ms(r.merge.cpu)} |`,
    );
    console.log(rows.at(-1));
  }
} finally {
  set.close();
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
