import fs from 'node:fs/promises';
import path from 'node:path';
import { commandStream } from '../stream.ts';
import { HG } from '../constants.ts';
import type { VcsDriver } from '../driver.ts';
import { output } from '../refs.ts';
import { HgOps } from './ops.ts';
import { HgReader } from './reader.ts';
import { filesAt, moves, snapshot, warmBookkeeping } from './refs.ts';
import { transport } from './transport.ts';

async function exists(p: string): Promise<boolean> {
  return fs
    .access(p)
    .then(() => true)
    .catch(() => false);
}

/**
 * Mercurial: command servers with Triad's extensions for reads (triadread.py) and operations
 * (triadops.py), hgweb (hgweb.py) for the wire protocol.
 */
export const hgDriver: VcsDriver = {
  kind: 'hg',
  constants: HG,
  async init(dest) {
    await fs.mkdir(path.dirname(dest), { recursive: true });
    await output(HG.bin, ['init', dest], HG.env);
  },
  openReader: (dir) => new HgReader(dir),
  transport,
  /**
   * A transaction interrupted (its process killed) leaves a journal, and every later write fails
   * with "abandoned transaction found" until `hg recover` rolls it back.
   */
  async recover(dir) {
    const left = [];
    for (const j of ['.hg/store/journal', '.hg/journal']) if (await exists(path.join(dir, j))) left.push(j);
    if (left.length > 0)
      await output(HG.bin, ['-R', dir, '--config', 'ui.interactive=false', 'recover'], HG.env);
    return left;
  },
  prepare: warmBookkeeping,
  snapshot,
  moves,
  filesAt,
  // `path:` makes the file relative to the repository root, not the working directory
  catFile: (dir, commit, file) =>
    commandStream(HG.bin, ['-R', dir, 'cat', '-r', commit, `path:${file}`], HG.env),
  // `-` writes the archive to standard output; no `.hg_archival.txt` metadata file
  archive: (dir, commit, format, prefix) =>
    commandStream(
      HG.bin,
      [
        '-R',
        dir,
        '--config',
        'ui.archivemeta=false',
        'archive',
        '-t',
        format === 'zip' ? 'zip' : 'tgz',
        '-p',
        prefix,
        '-r',
        commit,
        '--',
        '-',
      ],
      HG.env,
    ),
  createOps: (opts) => new HgOps(opts),
};
