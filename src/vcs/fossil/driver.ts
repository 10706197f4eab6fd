import fs from 'node:fs/promises';
import path from 'node:path';
import { fileOutputStream, openFileClosing } from '../process/stream.ts';
import { FOSSIL } from '../constants.ts';
import type { VcsDriver } from '../driver.ts';
import { branchHeads, output } from '../refs.ts';
import { FossilOps } from './ops.ts';
import { FossilReader } from './reader.ts';
import { filesAt, moves, snapshot } from './refs.ts';
import { BACKOFFICE_OFF, sqlText } from './sql.ts';
import { transport } from './transport.ts';

/** Fossil: repository files, `fossil sql` reads, the Fossil CGI, merges in throw-away check-outs. */
export const fossilDriver: VcsDriver = {
  kind: 'fossil',
  constants: FOSSIL,
  async init(dest, name) {
    await fs.mkdir(path.dirname(dest), { recursive: true });
    await output(FOSSIL.bin, ['new', '--admin-user', 'triad', dest], FOSSIL.env);
    // Triad authenticates HTTP requests and passes REMOTE_USER as one of these two users;
    // nobody else (including anonymous sync) gets any capability.
    const sql = [
      `REPLACE INTO config(name, value, mtime) VALUES ('remote_user_ok', '1', now())`,
      `UPDATE user SET cap = '' WHERE login IN ('nobody', 'anonymous', 'reader', 'developer')`,
      `INSERT INTO user(login, pw, cap, info) VALUES ('${FOSSIL.reader}', lower(hex(randomblob(20))), 'goz', 'Triad pull access')`,
      `INSERT INTO user(login, pw, cap, info) VALUES ('${FOSSIL.writer}', lower(hex(randomblob(20))), 'giozh', 'Triad push access')`,
      BACKOFFICE_OFF,
      // A clone takes the project name with it (`fossil info`, the web pages' title).
      ...(name === undefined
        ? []
        : [`REPLACE INTO config(name, value, mtime) VALUES ('project-name', ${sqlText(name)}, now())`]),
    ].join('; ');
    await output(FOSSIL.bin, ['sql', '-R', dest, sql], FOSSIL.env);
  },
  openReader: (file) => new FossilReader(file),
  transport,
  // SQLite rolls an interrupted transaction back the next time the repository is opened.
  recover: () => Promise.resolve([]),
  snapshot,
  moves,
  filesAt,
  refHeads: branchHeads,
  // `--` ends the options: a file named `-x` or `--args` is a file name, not an option
  // `fossil cat` writes with stdio and fails on a non-blocking socket: with `socket`, its pipe is
  // handed on to `cat` writing to the connection, which is then closed after the response.
  catFile: (dir, commit, file, { size, head, nice, socket }) => {
    if (size === undefined) throw new Error('fossil: a raw read needs the size the reader answered');
    const args = ['cat', '-R', dir, '-r', commit, '--', file];
    return openFileClosing(FOSSIL.bin, args, FOSSIL.env, nice, { size, head, what: 'fossil cat', socket });
  },
  archive: (file, commit, format, prefix, nice, signal) =>
    fileOutputStream(
      FOSSIL.bin,
      (out) => [format === 'zip' ? 'zip' : 'tarball', commit, out, '-R', file, '--name', prefix],
      FOSSIL.env,
      nice,
      signal,
    ),
  createOps: (opts) => new FossilOps(opts),
};
