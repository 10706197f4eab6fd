import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Child } from '../process/child.ts';
import { commandStream, openFile, producerExit } from '../process/stream.ts';
import { HG } from '../constants.ts';
import type { VcsDriver } from '../driver.ts';
import type { ProcessPool } from '../process/pool.ts';
import { output } from '../refs.ts';
import { HgOps } from './ops.ts';
import { HgReader } from './reader.ts';
import { bookkeeping } from './refs.ts';
import { transport } from './transport.ts';

async function exists(p: string): Promise<boolean> {
  return fs
    .access(p)
    .then(() => true)
    .catch(() => false);
}

const TRIADCAT = fileURLToPath(new URL('./triadcat.py', import.meta.url));

/**
 * Mercurial: command servers with Triad's extensions for reads (triadread.py), operations
 * (triadops.py) and the push bookkeeping (triadfresh.py), kept in the server's process pool;
 * hgweb (hgwsgi.py) for the wire protocol, triadcat.py for raw file downloads.
 */
export const createHgDriver = (pool: ProcessPool): VcsDriver => ({
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
  ...bookkeeping(pool),
  // triadcat.py writes the size of the file's data (a first revision's size needs the whole
  // revision in Mercurial: copy metadata), then the data, as `hg cat` prints it.
  catFile: async (dir, commit, file, { head, nice, socket }) => {
    const what = 'hg triadcat';
    if (socket === undefined)
      return openFile(commandStream(HG.python, [TRIADCAT, dir, commit, file], HG.env, nice), { head, what });
    // triadcat.py with a head size: it writes the size and the head, then waits for one line on
    // its standard input: `socket` (write the whole file to fd 3, the connection) or `pipe` (the
    // rest to standard output, as without it).
    let child: Child | undefined;
    const args = [TRIADCAT, dir, commit, file, String(head)];
    const source = commandStream(HG.python, args, HG.env, nice, {
      socket,
      spawned: (c) => {
        child = c;
        c.stdin?.on('error', () => undefined); // a process gone first: its exit tells
      },
    });
    const opened = await openFile(source, { head, what });
    const told = (line: string) => child?.stdin?.end(`${line}\n`);
    const it = opened.body[Symbol.asyncIterator]();
    let piped = false;
    const body: AsyncIterableIterator<Buffer> = {
      [Symbol.asyncIterator]: () => body,
      next: async () => {
        if (!piped) told('pipe');
        piped = true;
        return it.next();
      },
      return: async () => (await it.return?.()) ?? { done: true, value: undefined },
    };
    const handOff = async () => {
      if (child === undefined) throw new Error(`${what}: no process`);
      const exited = producerExit(child, HG.python, args, socket);
      told('socket');
      try {
        await exited;
      } finally {
        await it.return?.(); // the exited process's standard output, never read further
      }
    };
    return { size: opened.size, head: opened.head, body, handOff };
  },
  // `-` writes the archive to standard output; no `.hg_archival.txt` metadata file
  archive: (dir, commit, format, prefix, nice, signal) =>
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
      nice,
      signal === undefined ? {} : { signal },
    ),
  createOps: (opts) => new HgOps({ timeoutMs: opts.timeoutMs, pool }),
});
