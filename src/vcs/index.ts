import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { FossilReader } from './fossil.ts';
import { GitReader } from './git.ts';
import { HgReader } from './hg.ts';
import type { RepoReader } from './reader.ts';

const run = promisify(execFile);

export const VCS_KINDS = ['hg', 'git', 'fossil'] as const;
export type VcsKind = (typeof VCS_KINDS)[number];

/** Fossil users Triad maps authenticated HTTP callers to (REMOTE_USER). */
export const FOSSIL_READER = 'triad-reader';
export const FOSSIL_WRITER = 'triad-writer';

/**
 * Fossil's "backoffice" (e-mail alerts and the like; Triad uses none) would run after web
 * requests in a child that leaves the request's process group (setsid) and can linger for a
 * minute: every repository Triad serves has it off (set at creation, and before serving a
 * repository created earlier).
 */
export const FOSSIL_BACKOFFICE_OFF = `REPLACE INTO config(name, value, mtime) VALUES ('backoffice-disable', '1', now()), ('backoffice-nodelay', '1', now())`;

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
    case 'fossil': {
      const env = { ...quietEnv, USER: 'triad' };
      await run('fossil', ['new', '--admin-user', 'triad', dest], { env });
      // Triad authenticates HTTP requests and passes REMOTE_USER as one of these two users;
      // nobody else (including anonymous sync) gets any capability.
      const sql = [
        `REPLACE INTO config(name, value, mtime) VALUES ('remote_user_ok', '1', now())`,
        `UPDATE user SET cap = '' WHERE login IN ('nobody', 'anonymous', 'reader', 'developer')`,
        `INSERT INTO user(login, pw, cap, info) VALUES ('${FOSSIL_READER}', lower(hex(randomblob(20))), 'goz', 'Triad pull access')`,
        `INSERT INTO user(login, pw, cap, info) VALUES ('${FOSSIL_WRITER}', lower(hex(randomblob(20))), 'giozh', 'Triad push access')`,
        FOSSIL_BACKOFFICE_OFF,
      ].join('; ');
      await run('fossil', ['sql', '-R', dest, sql], { env });
      return;
    }
  }
}

export async function removeRepository(dest: string): Promise<void> {
  await fs.rm(dest, { recursive: true, force: true });
}

/** A read driver for one repository (see reader.ts); the server pools them in a `ReaderPool`. */
export function openReader(vcs: VcsKind, dir: string): RepoReader {
  switch (vcs) {
    case 'git':
      return new GitReader(dir);
    case 'hg':
      return new HgReader(dir);
    case 'fossil':
      return new FossilReader(dir);
  }
}
