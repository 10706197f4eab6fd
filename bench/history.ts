/**
 * The 10,000-commit repositories of the VCS-operation and pull request benchmarks: one linear
 * history (200 files of 80 lines, one line changed per commit) as git (`git fast-import`), Fossil
 * (`fossil import --git` of it) and Mercurial (`hg convert` of it, the slow one: minutes), and
 * copies of them with a client that adds commits on a branch or bookmark.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { VcsKind } from '../src/vcs/index.ts';

const exec = promisify(execFile);
export const ENV = {
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
export const run = async (cmd: string, args: string[], cwd: string): Promise<string> =>
  (await exec(cmd, args, { cwd, env: ENV, maxBuffer: 256 * 1024 * 1024 })).stdout;

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

/**
 * The repositories under `store` (made once, kept between runs): a bare git repository
 * `git.git`, `repo.fossil` and a Mercurial repository `hg` with `@` on its tip. Only the `kinds`
 * asked for (git always: the others are converted from it).
 */
export async function generateHistory(
  STORE: string,
  COMMITS: number,
  kinds: readonly VcsKind[] = ['git', 'hg', 'fossil'],
): Promise<void> {
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
  if (kinds.includes('fossil') && !existsSync(`${fossil}.done`)) {
    await fs.rm(fossil, { force: true });
    await run(
      'sh',
      ['-c', `git -C '${git}' fast-export --all | fossil import --git '${fossil}' >/dev/null`],
      STORE,
    );
    await fs.writeFile(`${fossil}.done`, '');
  }
  const hg = path.join(STORE, 'hg');
  if (kinds.includes('hg') && !existsSync(path.join(hg, '.hg', 'done'))) {
    console.log('hg: converting the git history (a few minutes)...');
    await fs.rm(hg, { recursive: true, force: true });
    await run('/usr/bin/hg', ['--config', 'extensions.convert=', 'convert', '-q', git, hg], STORE);
    await run('/usr/bin/hg', ['bookmark', '-R', hg, '-f', '-r', 'tip', '@'], STORE);
    await fs.writeFile(path.join(hg, '.hg', 'done'), '');
  }
}

// ------------------------------------------------------------------ PR branches through the clients

export type Repo = {
  kind: VcsKind;
  srv: string;
  main: string;
  /** A commit on `ref`, created from `from` (a ref), changing `file` line 1 to `text`. */
  commit(ref: string, from: string, file: string, text: string): Promise<void>;
};

/** Fresh copies of the generated repositories in `work`, with a client that commits to them directly. */
export async function prepare(STORE: string, kind: VcsKind, work: string): Promise<Repo> {
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
