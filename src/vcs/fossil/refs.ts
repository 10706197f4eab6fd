/** Fossil snapshots (newest leaf per branch, symbolic tags, the highest rid) and ref moves. */
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import { FOSSIL } from '../constants.ts';
import type { CappedFile, CommitInfo, Snapshot, VcsDriver } from '../driver.ts';
import { branchMoves, eachAt, output, tagMoves } from '../refs.ts';

// `fossil sql` prints rows in SQLite's quote mode; every selected field is hex() so that
// arbitrary text survives, and the fields are decoded here.
async function sql(file: string, query: string): Promise<string[][]> {
  const text = await output(FOSSIL.bin, ['sql', '-R', file, '--readonly', query], FOSSIL.env);
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split(',').map((f) => Buffer.from(f.replace(/^'|'$/g, ''), 'hex').toString('utf8')));
}

const BRANCH_OF = (rid: string) =>
  `(select value from tagxref x where x.rid = ${rid} and x.tagtype > 0 and x.tagid = (select tagid from tag where tagname = 'branch'))`;

/**
 * The refs in one `fossil sql` run (a push of a long history is many sync round trips, each
 * snapshotted before and after): the newest check-in, each branch's newest leaf, the symbolic
 * tags and the highest rid, as one JSON value.
 */
const SNAPSHOT = `select hex(json_object(
  'tip', (select b.uuid from event e join blob b on b.rid = e.objid where e.type = 'ci' order by e.mtime desc limit 1),
  'mark', (select coalesce(max(rid), 0) from blob),
  'leaves', json((select json_group_array(json_array(coalesce(${BRANCH_OF('l.rid')}, 'trunk'), b.uuid, e.mtime))
               from leaf l join blob b on b.rid = l.rid join event e on e.objid = l.rid)),
  'tags', json((select json_group_array(json_array(substr(t.tagname, 5), b.uuid)) from tagxref x
             join tag t on t.tagid = x.tagid join blob b on b.rid = x.rid
            where t.tagname like 'sym-%' and x.tagtype = 1))))`;

type SnapshotRow = {
  tip: string | null;
  mark: number;
  leaves: [string, string, number][];
  tags: [string, string][];
};

/**
 * Identifies a repository file's committed content without opening it: SQLite's file change
 * counter (header bytes 24–27, bumped by every committed write in rollback-journal mode) with the
 * file's inode, size and mtime. Undefined (no caching) in WAL mode, where the counter is not kept.
 */
async function version(file: string): Promise<string | undefined> {
  if (existsSync(`${file}-wal`)) return undefined;
  const fh = await fs.open(file, 'r').catch(() => undefined);
  if (fh === undefined) return undefined;
  try {
    const head = Buffer.alloc(100);
    const st = await fh.stat();
    const { bytesRead } = await fh.read(head, 0, 100, 0);
    if (bytesRead < 100 || head.subarray(0, 16).toString('latin1') !== 'SQLite format 3\0') return undefined;
    if (head[18] === 2) return undefined; // WAL
    return `${st.ino}:${st.size}:${st.mtimeMs}:${head.readUInt32BE(24)}`;
  } finally {
    await fh.close();
  }
}

/**
 * The last snapshot of recently pushed-to repositories: a sync round trip that wrote nothing (a
 * clone by a writer, the first request of a push) reads no SQL, and the snapshot before a round
 * trip is the one taken after the previous.
 */
const snapshots = new Map<string, { version: string; snap: Snapshot }>();
const SNAPSHOTS_KEPT = 64;

export async function snapshot(file: string): Promise<Snapshot> {
  const v = await version(file);
  const hit = snapshots.get(file);
  if (v !== undefined && hit?.version === v) return hit.snap;
  const snap = await query(file);
  // Kept only when the file did not change while it was read.
  if (v !== undefined && (await version(file)) === v) {
    snapshots.delete(file);
    snapshots.set(file, { version: v, snap });
    if (snapshots.size > SNAPSHOTS_KEPT) snapshots.delete(snapshots.keys().next().value!);
  }
  return snap;
}

async function query(file: string): Promise<Snapshot> {
  const [[json = '{}'] = []] = await sql(file, SNAPSHOT);
  const row = JSON.parse(json) as SnapshotRow;
  // The newest leaf of a branch names its head (oldest first, so the newest wins).
  const leaves = [...row.leaves].sort((a, b) => a[2] - b[2]);
  return {
    tip: row.tip ?? '',
    branches: new Map(leaves.map(([b, u]) => [b, u])),
    bookmarks: new Map(),
    tags: new Map(row.tags),
    mark: row.mark,
  };
}

/** Check-ins matching `where` (over `event e` joined to `blob b`), newest first. */
const commitsSql = (where: string, limit: number) =>
  `select hex(b.uuid), hex(e.user), hex(''), hex(strftime('%Y-%m-%dT%H:%M:%SZ', e.mtime)),
          hex(coalesce(e.ecomment, e.comment, ''))
     from event e join blob b on b.rid = e.objid where ${where} order by e.mtime desc limit ${limit}`;

function commitRows(rows: string[][]): CommitInfo[] {
  return rows.map(([id = '', name = '', email = '', date = '', message = '']) => ({
    id,
    message,
    author: { name, email, date },
  }));
}

async function commits(file: string, where: string, limit: number): Promise<CommitInfo[]> {
  return commitRows(await sql(file, commitsSql(where, limit)));
}

/** Check-ins on `branch` above `mark` (new since the snapshot that had it): their count, then the list, in one run. */
async function newCommits(file: string, branch: string, mark: number, max: number) {
  const where = `e.type = 'ci' and e.objid > ${mark} and coalesce(${BRANCH_OF('e.objid')}, 'trunk') = '${branch.replace(/'/g, "''")}'`;
  const [[count = '0'] = [], ...rows] = await sql(
    file,
    `select hex(cast(count(*) as text)) from event e where ${where}; ${commitsSql(where, max)}`,
  );
  return { commits: commitRows(rows), total: Number(count) };
}

export const moves: VcsDriver['moves'] = async (file, before, after, opts) => {
  const branches = await branchMoves(before, after, opts, (_head, branch) =>
    newCommits(file, branch, before.mark, opts.maxCommits),
  );
  const tags = await tagMoves(before, after, (ids) => {
    const list = ids.map((id) => `'${id.replace(/[^0-9a-f]/g, '')}'`).join(', ');
    return commits(file, `b.uuid in (${list})`, ids.length);
  });
  return [...branches, ...tags];
};

/** The file at each revision: its size from `fossil ls -v`, its content only within the cap. */
export const filesAt: VcsDriver['filesAt'] = (file, revs, name, maxBytes) =>
  eachAt(revs, async (rev): Promise<CappedFile | undefined> => {
    const listing = await output(FOSSIL.bin, ['ls', '-R', file, '-r', rev, '-v', name], FOSSIL.env).catch(
      () => '',
    );
    // `DATE TIME SIZE NAME` per file under `name` (a file, or a directory of that name)
    const row = listing
      .split('\n')
      .map((l) => /^\S+ \S+\s+(\d+) {2}(.*)$/.exec(l))
      .find((m) => m?.[2] === name);
    if (row == null) return undefined;
    const size = Number(row[1]);
    if (size > maxBytes) return { tooLarge: size };
    return output(FOSSIL.bin, ['cat', '-R', file, '-r', rev, name], FOSSIL.env).catch(() => undefined);
  });
