import fs from 'node:fs/promises';
import path from 'node:path';
import { commandStream } from '../stream.ts';
import { GIT } from '../constants.ts';
import type { VcsDriver } from '../driver.ts';
import { output } from '../refs.ts';
import { GitOps } from './ops.ts';
import { GitReader } from './reader.ts';
import { recover } from './recover.ts';
import { filesAt, moves, snapshot } from './refs.ts';
import { transport } from './transport.ts';

/** Git: bare repositories, `git cat-file` reads, `git http-backend`, plumbing operations. */
export const gitDriver: VcsDriver = {
  kind: 'git',
  constants: GIT,
  async init(dest) {
    await fs.mkdir(path.dirname(dest), { recursive: true });
    await output(
      GIT.bin,
      ['init', '--bare', '--quiet', `--initial-branch=${GIT.defaultBranch}`, dest],
      GIT.env,
    );
    await output(GIT.bin, ['-C', dest, 'config', 'http.receivepack', 'true'], GIT.env);
  },
  openReader: (dir) => new GitReader(dir),
  transport,
  recover,
  snapshot,
  moves,
  filesAt,
  catFile: (dir, commit, file) =>
    commandStream(GIT.bin, ['-C', dir, 'cat-file', 'blob', `${commit}:${file}`], GIT.env),
  archive: (dir, commit, format, prefix) =>
    commandStream(
      GIT.bin,
      ['-C', dir, 'archive', `--format=${format}`, `--prefix=${prefix}/`, commit],
      GIT.env,
    ),
  createOps: (opts) => new GitOps(opts),
};
