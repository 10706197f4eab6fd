/**
 * Fossil backups: the repository file itself, uploaded when its sha256 differs from the last one
 * stored (Fossil has no incremental bundle a plain `fossil` restores from; its sync protocol needs
 * a server on both sides). The copy is taken under the caller's lock, so no writer changes the file
 * while it is read. A restore writes the last file back.
 */
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { FOSSIL } from '../../vcs/constants.ts';
import { sqlText } from '../../vcs/fossil/sql.ts';
import { runChecked } from '../../vcs/process/run.ts';
import {
  COMMAND_TIMEOUT_MS,
  fileDigest,
  type Captured,
  type FossilRefs,
  type KindBackup,
} from './manifest.ts';

async function sql(file: string, query: string, readonly = true): Promise<string> {
  const args = ['sql', '-R', file, ...(readonly ? ['--readonly'] : []), query];
  const r = await runChecked(FOSSIL.bin, args, { env: FOSSIL.env, timeoutMs: COMMAND_TIMEOUT_MS });
  return r.stdout.toString('utf8');
}

const BRANCH_OF = (rid: string) =>
  `(select value from tagxref x where x.rid = ${rid} and x.tagtype > 0 and x.tagid = (select tagid from tag where tagname = 'branch'))`;

/** Branch -> newest leaf (as the driver's snapshot names a branch's head) and symbolic tags, as one JSON value. */
const REFS = `select hex(json_object(
  'leaves', json((select json_group_array(json_array(coalesce(${BRANCH_OF('l.rid')}, 'trunk'), b.uuid, e.mtime))
                  from leaf l join blob b on b.rid = l.rid join event e on e.objid = l.rid)),
  'tags', json((select json_group_array(json_array(substr(t.tagname, 5), b.uuid)) from tagxref x
                join tag t on t.tagid = x.tagid join blob b on b.rid = x.rid
               where t.tagname like 'sym-%' and x.tagtype = 1))))`;

async function readRefs(
  file: string,
): Promise<{ branches: Record<string, string>; tags: Record<string, string> }> {
  const hex = (await sql(file, REFS)).trim().replace(/^'|'$/g, '');
  const row = JSON.parse(Buffer.from(hex, 'hex').toString('utf8')) as {
    leaves: [string, string, number][];
    tags: [string, string][];
  };
  // Oldest first, so that a branch's newest leaf is the one kept.
  const leaves = [...row.leaves].sort((a, b) => a[2] - b[2] || (a[1] < b[1] ? -1 : 1));
  const branches = new Map(leaves.map(([branch, uuid]) => [branch, uuid]));
  return { branches: byName([...branches]), tags: byName(row.tags) };
}

/** Entries sorted by name, so that equal refs serialise equally. */
const byName = (entries: [string, string][]) =>
  Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/**
 * A copy of the repository file. Rollback-journal mode (Fossil's default, Triad's repositories):
 * the file alone holds every committed change, so a file copy is exact. A WAL file, or a journal
 * left by a writer that died, means the file alone may be behind or half written: SQLite then
 * writes a consistent copy itself (`VACUUM INTO`, after rolling a hot journal back).
 */
async function copy(file: string, to: string): Promise<void> {
  if (!existsSync(`${file}-wal`) && !existsSync(`${file}-journal`)) {
    await fs.copyFile(file, to);
    return;
  }
  await sql(file, `VACUUM INTO ${sqlText(to)}`, false);
}

export const fossilBackup: KindBackup<FossilRefs> = {
  ext: 'fossil',
  replaces: true,
  async capture(file, prev, work): Promise<Captured<FossilRefs>> {
    const data = path.join(work, 'repo.fossil');
    await copy(file, data);
    const sha256 = await fileDigest(data);
    const { size } = await fs.stat(data);
    // The refs are read from the copy, so they are the uploaded file's.
    const { branches, tags } = await readRefs(data);
    const heads = [...new Set(Object.values(branches))].sort();
    const changed = prev === undefined || prev.refs.sha256 !== sha256;
    return { data: changed ? data : undefined, heads, refs: { sha256, size, branches, tags } };
  },

  async restore(stage, objects, m) {
    const key = objects.keys.at(-1);
    if (key === undefined) throw new Error('fossil restore: the manifest names no repository file');
    await fs.mkdir(path.dirname(stage), { recursive: true });
    // `fetch` checks the object's sha256 against the manifest's, which is the file's.
    await objects.fetch(key, stage);
    const refs = await readRefs(stage);
    const want = {
      branches: byName(Object.entries(m.refs.branches)),
      tags: byName(Object.entries(m.refs.tags)),
    };
    if (JSON.stringify(refs) !== JSON.stringify(want))
      throw new Error('fossil restore: the refs differ from the manifest');
  },
};
