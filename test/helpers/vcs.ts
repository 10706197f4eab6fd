import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export const vcsEnv = {
  ...process.env,
  HGPLAIN: '1',
  HGUSER: 'Ada Lovelace <ada@example.test>',
  USER: 'ada',
  GIT_AUTHOR_NAME: 'Ada Lovelace',
  GIT_AUTHOR_EMAIL: 'ada@example.test',
  GIT_COMMITTER_NAME: 'Ada Lovelace',
  GIT_COMMITTER_EMAIL: 'ada@example.test',
  GIT_TERMINAL_PROMPT: '0',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
  HGRCPATH: '',
};

export type RunResult = { stdout: string; stderr: string; code: number };

/** Runs a VCS command; never throws on a non-zero exit (tests assert on `code`). */
export async function sh(cmd: string, args: string[], cwd: string): Promise<RunResult> {
  try {
    const r = await exec(cmd, args, { cwd, env: vcsEnv, maxBuffer: 64 * 1024 * 1024 });
    return { stdout: r.stdout, stderr: r.stderr, code: 0 };
  } catch (e) {
    const x = e as { stdout?: string; stderr?: string; code?: number };
    return { stdout: x.stdout ?? '', stderr: x.stderr ?? '', code: typeof x.code === 'number' ? x.code : 1 };
  }
}

/** Like `sh` but fails the test with the command's output when it exits non-zero. */
export async function ok(cmd: string, args: string[], cwd: string): Promise<string> {
  const r = await sh(cmd, args, cwd);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/**
 * A new directory in the temporary directory. Its path is added to the run's list
 * (`TRIAD_TEST_TEMP_LIST`, made by global-setup.ts), and global-teardown.ts removes every
 * directory on it once the whole run is over (no test file's hooks can still need one).
 */
export async function tempDir(prefix = 'triad-vcs-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  const list = process.env.TRIAD_TEST_TEMP_LIST;
  if (list !== undefined) await fs.appendFile(list, `${dir}\n`);
  return dir;
}

/** `http://x:token@host/path` for clients that take credentials from the URL. */
export function withCreds(url: string, token: string): string {
  const u = new URL(url);
  u.username = 'x';
  u.password = token;
  return u.toString();
}

export async function writeFile(dir: string, rel: string, content: string | Buffer): Promise<void> {
  const p = path.join(dir, rel);
  await fs.mkdir(path.dirname(p), { recursive: true });
  await fs.writeFile(p, content);
}

/**
 * Pushes a first commit (a README.md on `main`), with the given tags, to the Git repository at
 * `clone` as the holder of `token`.
 */
export async function pushFirstGitCommit(clone: string, token: string, tags: string[] = []): Promise<void> {
  const work = await tempDir();
  await ok('git', ['init', '-q', '-b', 'main', work], work);
  await writeFile(work, 'README.md', '# hello\n');
  await ok('git', ['add', '.'], work);
  await ok('git', ['commit', '-q', '-m', 'first'], work);
  for (const t of tags) await ok('git', ['tag', t], work);
  await ok(
    'git',
    ['push', '-q', withCreds(clone, token), 'main', ...(tags.length > 0 ? ['--tags'] : [])],
    work,
  );
}
