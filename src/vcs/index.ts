import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const VCS_KINDS = ['hg', 'git', 'fossil'] as const;
export type VcsKind = (typeof VCS_KINDS)[number];

export const DEFAULT_BRANCH: Record<VcsKind, string> = { hg: 'default', git: 'main', fossil: 'trunk' };

/** Storage is keyed by the repository id, so renames and org renames never move files. */
export function repoPath(root: string, id: number, vcs: VcsKind): string {
  return path.join(root, vcs === 'fossil' ? `${id}.fossil` : `${id}.${vcs}`);
}

const quietEnv = { ...process.env, HGPLAIN: '1', GIT_TERMINAL_PROMPT: '0' };

/** Creates an empty repository of the given kind at `dest` (which must not exist). */
export async function initRepository(vcs: VcsKind, dest: string): Promise<void> {
  await fs.mkdir(path.dirname(dest), { recursive: true });
  switch (vcs) {
    case 'git':
      await run('git', ['init', '--bare', '--quiet', `--initial-branch=${DEFAULT_BRANCH.git}`, dest], {
        env: quietEnv,
      });
      await run('git', ['-C', dest, 'config', 'http.receivepack', 'true'], { env: quietEnv });
      return;
    case 'hg':
      await run('hg', ['init', dest], { env: quietEnv });
      return;
    case 'fossil':
      await run('fossil', ['new', '--admin-user', 'triad', dest], { env: { ...quietEnv, USER: 'triad' } });
      return;
  }
}

export async function removeRepository(dest: string): Promise<void> {
  await fs.rm(dest, { recursive: true, force: true });
}
