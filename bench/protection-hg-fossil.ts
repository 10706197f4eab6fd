/**
 * The push cost of protected refs for Mercurial and Fossil: pushes of five commits each to a
 * repository with 0 rules and with 50 rules (49 patterns that match nothing pushed and one that
 * matches the pushed branch and lets the pusher, an org owner, through), side by side. With rules,
 * every Mercurial push runs the hgweb worker's transaction hook (src/vcs/hg/triadprotect.py), and
 * every Fossil sync request that sends artifacts first runs against a copy of the repository
 * (src/vcs/fossil/protect.ts).
 *
 *   npm run bench:protection-hg-fossil [-- --pushes 10] [--kinds hg,fossil] [--rules 0,50]
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { insertRule } from '../src/protection/repository.ts';
import { apiCaller, startBenchServer } from './lib/server.ts';

const exec = promisify(execFile);
const { values } = parseArgs({
  options: {
    pushes: { type: 'string', default: '10' },
    kinds: { type: 'string', default: 'hg,fossil' },
    rules: { type: 'string', default: '0,50' },
  },
});
const PUSHES = Number(values.pushes);
const RULES = values.rules.split(',').map(Number);
const ENV = { ...process.env, USER: 'bench', HGUSER: 'bench <bench@example.test>', HGPLAIN: '1' };
const run = async (cmd: string, args: string[], cwd: string) =>
  (await exec(cmd, args, { cwd, env: ENV })).stdout;

const server = await startBenchServer('protection-hg-fossil');
const { running, token, dir } = server;
const call = apiCaller(running.url, token);

/** A working copy of a new repository with one pushed commit; `push()` pushes the next five. */
async function setUp(kind: 'hg' | 'fossil', name: string, rules: number) {
  const created = await call('POST', '/api/v1/orgs/bench/repos', { name, vcs: kind });
  const id = created.data.id as number;
  const em = running.orm.em.fork();
  for (let i = 0; i < rules; i++) {
    const pattern = i === 0 ? (kind === 'hg' ? 'default' : 'trunk') : `release/${i}/**`;
    await insertRule(em, id, {
      pattern,
      fast_forward_only: true,
      allow_deletion: false,
      push: 'members',
      require_pipeline: false,
      required_contexts: [],
    });
  }
  const clone = (created.data.clone_url as string).replace('://', `://x:${token}@`);
  const w = path.join(dir, 'work', name);
  await fs.mkdir(w, { recursive: true });
  let n = 0;
  const commit = async () => {
    n += 1;
    await fs.writeFile(path.join(w, `file${n}.txt`), `line ${n}\n`); // a new file: fossil sees it whatever the mtime
    if (kind === 'hg') await run('hg', ['commit', '-q', '-A', '-m', `c${n}`], w);
    else {
      await run('fossil', ['addremove'], w);
      await run('fossil', ['commit', '--no-warnings', '-m', `c${n}`], w);
    }
  };
  if (kind === 'hg') await run('hg', ['init'], w);
  else {
    await run('fossil', ['clone', '-B', `x:${token}`, created.data.clone_url, `${w}.fossil`], dir);
    await run('fossil', ['open', '-f', `${w}.fossil`], w);
    await run('fossil', ['settings', 'autosync', 'off'], w);
  }
  const push = () =>
    kind === 'hg'
      ? run('hg', ['push', '-q', clone], w)
      : run('fossil', ['push', '-B', `x:${token}`, created.data.clone_url], w);
  await commit();
  await push();
  return async (): Promise<number> => {
    for (let i = 0; i < 5; i++) await commit();
    const t = performance.now();
    await push();
    return performance.now() - t;
  };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.ceil((p / 100) * xs.length) - 1]!;
try {
  await call('POST', '/api/v1/orgs', { name: 'bench' });
  console.log(
    `| kind | rules | pushes | p50 (ms) | max (ms) |\n| ---- | ----- | ------ | -------- | -------- |`,
  );
  for (const kind of values.kinds.split(',') as ('hg' | 'fossil')[]) {
    const pushers = new Map<number, () => Promise<number>>();
    for (const r of RULES) pushers.set(r, await setUp(kind, `${kind}-${r}`, r));
    const times = new Map(RULES.map((r) => [r, [] as number[]]));
    for (const push of pushers.values()) await push(); // warm-up (workers, command servers)
    // alternating, so a busy moment of the machine hits each side alike
    for (let i = 0; i < PUSHES; i++) for (const r of RULES) times.get(r)!.push(await pushers.get(r)!());
    for (const [r, t] of times)
      console.log(`| ${kind} | ${r} | ${PUSHES} | ${pct(t, 50).toFixed(1)} | ${pct(t, 100).toFixed(1)} |`);
  }
} finally {
  await server.close();
}
