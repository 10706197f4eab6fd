import fs from 'node:fs/promises';
import path from 'node:path';
import { commandStream, commandToSocket, openFile } from '../process/stream.ts';
import { GIT } from '../constants.ts';
import type { VcsDriver } from '../driver.ts';
import { branchHeads, output } from '../refs.ts';
import { GitOps } from './ops.ts';
import { GitReader } from './reader.ts';
import { recover } from './recover.ts';
import { arrivals, filesAt, moves, snapshot } from './refs.ts';
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
  refHeads: branchHeads,
  arrivals,
  // The reader knows the size from the object's header (`cat-file --batch-command` info).
  catFile: async (dir, commit, file, { size, head, nice, socket }) => {
    if (size === undefined) throw new Error('git: a raw read needs the size the reader answered');
    const args = ['-C', dir, 'cat-file', 'blob', `${commit}:${file}`];
    const opened = await openFile(commandStream(GIT.bin, args, GIT.env, nice), {
      size,
      head,
      what: 'git cat-file',
    });
    if (socket === undefined) return opened;
    // `git cat-file blob` streams an undeltified object, so the first process, ended once its
    // head is read, inflated little more than that; the second writes the file to the socket.
    const handOff = async () => {
      await opened.body[Symbol.asyncIterator]().return?.();
      await commandToSocket(GIT.bin, args, GIT.env, nice, socket);
    };
    return { ...opened, handOff };
  },
  archive: (dir, commit, format, prefix, nice, signal) =>
    commandStream(
      GIT.bin,
      ['-C', dir, 'archive', `--format=${format}`, `--prefix=${prefix}/`, commit],
      GIT.env,
      nice,
      signal === undefined ? {} : { signal },
    ),
  createOps: (opts) => new GitOps(opts),
};
