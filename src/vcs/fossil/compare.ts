/**
 * The SQL of a Fossil three-dot compare (`RepoReader.compare`, reader.ts): the range of two
 * check-ins and the diff between the files of two check-ins, run on the reader's `fossil sql`.
 */
import { cappedDiff, type SizedChange } from '../diff.ts';
import { ReadNotFound, type ContentLimits, type DiffResult } from '../reader.ts';
import { sqlText } from './sql.ts';

/** One statement answering one JSON value (undefined: no row). */
type Query = <T>(sql: string) => Promise<T | undefined>;

export type FossilRange = { mergeBase: string | null; ids: number[] };

/**
 * The pivot of two check-ins (their most recent common ancestor, as `fossil merge` picks it) and
 * the check-ins only `head` reaches, oldest first, from one walk over the parent links that marks
 * each ancestor with the side(s) it is reached from (1 head, 2 base, 3 both).
 */
export async function rangeOf(query: Query, base: string, head: string): Promise<FossilRange> {
  const ci = (uuid: string) =>
    `(SELECT b.rid FROM blob b JOIN event e ON e.objid = b.rid AND e.type = 'ci' WHERE b.uuid = ${sqlText(uuid)})`;
  const r = await query<{ b: number | null; h: number | null; pivot: string | null; ids: number[] }>(
    `WITH RECURSIVE ends(b, h) AS (SELECT ${ci(base)}, ${ci(head)}),
       w(rid, side) AS (SELECT h, 1 FROM ends WHERE h IS NOT NULL UNION SELECT b, 2 FROM ends WHERE b IS NOT NULL
         UNION SELECT pid, side FROM plink JOIN w ON plink.cid = w.rid),
       m(rid, sides) AS MATERIALIZED (SELECT rid, sum(side) FROM w GROUP BY rid)
     SELECT json_object('b', (SELECT b FROM ends), 'h', (SELECT h FROM ends),
       'pivot', (SELECT x.uuid FROM m JOIN event e ON e.objid = m.rid JOIN blob x ON x.rid = m.rid
         WHERE m.sides = 3 ORDER BY e.mtime DESC LIMIT 1),
       'ids', json((SELECT json_group_array(rid) FROM (SELECT m.rid AS rid FROM m JOIN event e ON e.objid = m.rid
         WHERE m.sides = 1 ORDER BY e.mtime, m.rid))))`,
  );
  if (r === undefined || r.b === null || r.h === null) throw new ReadNotFound('revision');
  return { mergeBase: r.pivot, ids: r.ids };
}

type Change = {
  name: string;
  oldUuid: string | null;
  newUuid: string | null;
  oldPerm: string | null;
  newPerm: string | null;
  oldSize: number | null;
  newSize: number | null;
};

/** The capped diff between the files of two check-ins (none for a null `from`), by name. */
export async function treeDiff(
  query: Query,
  contents: (ids: string[]) => Promise<Map<string, Buffer | undefined>>,
  from: string | null,
  to: string,
  limits: ContentLimits,
): Promise<DiffResult> {
  const files = (uuid: string | null) =>
    uuid === null
      ? `SELECT NULL AS filename, NULL AS uuid, NULL AS perm WHERE 0`
      : `SELECT filename, uuid, perm FROM files_of_checkin(${sqlText(uuid)})`;
  const rows =
    (await query<Change[]>(
      `WITH a AS (${files(from)}), z AS (${files(to)}),
         names(n) AS (SELECT filename FROM a UNION SELECT filename FROM z)
       SELECT json_group_array(json_object('name', names.n, 'oldUuid', a.uuid, 'newUuid', z.uuid,
           'oldPerm', a.perm, 'newPerm', z.perm, 'oldSize', ob.size, 'newSize', nb.size))
       FROM names LEFT JOIN a ON a.filename = names.n LEFT JOIN z ON z.filename = names.n
         LEFT JOIN blob ob ON ob.uuid = a.uuid LEFT JOIN blob nb ON nb.uuid = z.uuid
       WHERE a.uuid IS NOT z.uuid OR a.perm IS NOT z.perm`,
    )) ?? [];
  rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // files_of_checkin's perm: 'x' executable, 'l' a symbolic link, NULL a plain file
  const mode = (perm: string | null) => (perm === 'x' ? '100755' : perm === 'l' ? '120000' : '100644');
  const changes: SizedChange[] = rows.map((c) => ({
    oldPath: c.oldUuid === null ? undefined : c.name,
    newPath: c.newUuid === null ? undefined : c.name,
    oldMode: mode(c.oldPerm),
    newMode: mode(c.newPerm),
    oldId: c.oldUuid ?? undefined,
    newId: c.newUuid ?? undefined,
    oldSize: c.oldUuid === null ? undefined : Math.max(0, c.oldSize ?? 0),
    newSize: c.newUuid === null ? undefined : Math.max(0, c.newSize ?? 0),
  }));
  return cappedDiff(changes, contents, limits);
}
