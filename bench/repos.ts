/**
 * The generated repositories the benchmarks share (bench/contents.ts, bench/transport.ts): one
 * history, the same in each VCS.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { VcsKind } from '../src/vcs/index.ts';

const exec = promisify(execFile);
/** The environment of the VCS commands the benchmarks run. */
export const ENV = { ...process.env, HGPLAIN: '1', HGRCPATH: '', USER: 'bench', GIT_CONFIG_NOSYSTEM: '1' };

/** A fast-import stream: 200 files of 80 lines in 20 directories, one line changed per commit. */
export function* fastImport(n: number): Generator<Buffer> {
  const files = new Map<string, string[]>();
  for (let d = 0; d < 20; d++) {
    for (let f = 0; f < 10; f++) {
      files.set(
        `pkg${d}/mod${f}.txt`,
        Array.from({ length: 80 }, (_, i) => `pkg${d} mod${f} line ${i} lorem ipsum dolor sit amet`),
      );
    }
  }
  const keys = [...files.keys()];
  const data = (s: string | Buffer) => {
    const b = typeof s === 'string' ? Buffer.from(s) : s;
    return Buffer.concat([Buffer.from(`data ${b.length}\n`), b, Buffer.from('\n')]);
  };
  let t = 1_600_000_000;
  for (let i = 1; i <= n; i++) {
    t += 60;
    const parts: Buffer[] = [
      Buffer.from(
        `commit refs/heads/main\nmark :${i}\nauthor Bench User <bench@example.test> ${t} +0000\n` +
          `committer Bench User <bench@example.test> ${t} +0000\n`,
      ),
      data(`commit ${i}: change\n\nDetails of change ${i}.\n`),
    ];
    if (i > 1) parts.push(Buffer.from(`from :${i - 1}\n`));
    if (i === 1) {
      for (const [p, lines] of files)
        parts.push(Buffer.from(`M 100644 inline ${p}\n`), data(`${lines.join('\n')}\n`));
      parts.push(Buffer.from('M 100644 inline README.md\n'), data('# bench\n'));
      parts.push(Buffer.from('M 100644 inline logo.bin\n'), data(Buffer.from([0, 1, 2, 0xff, 0xfe])));
    } else {
      const p = keys[(i * 7) % keys.length] ?? '';
      const lines = files.get(p) ?? [];
      lines[(i * 13) % lines.length] = `changed in commit ${i}`;
      parts.push(Buffer.from(`M 100644 inline ${p}\n`), data(`${lines.join('\n')}\n`));
    }
    if (i % 1000 === 0) parts.push(Buffer.from(`reset refs/tags/v${i / 1000}\nfrom :${i}\n`));
    yield Buffer.concat(parts);
  }
}

export async function pipeInto(child: ChildProcess, chunks: Iterable<Buffer>): Promise<void> {
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
  const stdin = child.stdin;
  if (stdin === null) throw new Error('no stdin');
  for (const c of chunks) {
    if (!stdin.write(c)) await new Promise((r) => stdin.once('drain', r));
  }
  stdin.end();
  await done;
}

/**
 * One repository per VCS with the same `commits`-commit history under `work` (kept between runs):
 * git by `git fast-import`, Fossil by `fossil import --git` of it, Mercurial by `hg convert`.
 */
export async function generateRepos(work: string, commits: number): Promise<Record<VcsKind, string>> {
  const WORK = work;
  const COMMITS = commits;
  const run = async (cmd: string, args: string[], cwd = WORK): Promise<string> =>
    (await exec(cmd, args, { cwd, env: ENV, maxBuffer: 512 * 1024 * 1024 })).stdout;
  await fs.mkdir(WORK, { recursive: true });
  const git = path.join(WORK, 'git.git');
  const hg = path.join(WORK, 'hg');
  const fossil = path.join(WORK, 'repo.fossil');
  if (!existsSync(path.join(git, 'done'))) {
    const t = Date.now();
    await fs.rm(git, { recursive: true, force: true });
    await run('git', ['init', '-q', '--bare', '-b', 'main', git]);
    await pipeInto(
      spawn('git', ['-C', git, 'fast-import', '--quiet'], {
        env: ENV,
        stdio: ['pipe', 'inherit', 'inherit'],
      }),
      fastImport(COMMITS),
    );
    await fs.writeFile(path.join(git, 'done'), '');
    console.log(`git: ${COMMITS} commits by fast-import in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
  if (!existsSync(`${fossil}.done`)) {
    const t = Date.now();
    await fs.rm(fossil, { force: true });
    await run('sh', ['-c', `git -C '${git}' fast-export --all | fossil import --git '${fossil}' >/dev/null`]);
    // Anonymous reads for the fossil server baseline (timeline needs 'h').
    await run('fossil', ['sql', '-R', fossil, "UPDATE user SET cap = 'ghjorz' WHERE login = 'nobody'"]);
    await fs.writeFile(`${fossil}.done`, '');
    console.log(`fossil: import --git in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
  if (!existsSync(path.join(hg, '.hg', 'done'))) {
    const t = Date.now();
    await fs.rm(hg, { recursive: true, force: true });
    console.log('hg: converting from git (about 1.5 minutes for 10,000 commits)...');
    await run('/usr/bin/hg', ['--config', 'extensions.convert=', 'convert', '-q', git, hg]);
    await fs.writeFile(path.join(hg, '.hg', 'done'), '');
    console.log(`hg: convert in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
  return { git, hg, fossil };
}
