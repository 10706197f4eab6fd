import { Assignments, count, first, type Db } from '../db/query.ts';
import { intArray } from '../db/sql.ts';
import { CATALOG, LABEL, SCOPE_RANK, type CatalogOf, type LabelRow } from './repository.ts';

/**
 * The queries of the label catalog's management (the web's label pages): a scope's labels, a
 * label of one scope changed or deleted (and taken off the issues), and how many issues carry
 * labels. The lookups issues make in the catalog are in repository.ts.
 */

/** Where a label is defined: site-wide, in an organization, or in a repository. */
export type LabelOwner =
  { scope: 'admin' } | { scope: 'org'; orgId: number } | { scope: 'repo'; repoId: number };

/** The labels of exactly one scope (`l.`), with its parameters. */
function ofOwner(o: LabelOwner): { sql: string; params: unknown[] } {
  switch (o.scope) {
    case 'admin':
      return { sql: `l.scope = 'admin'`, params: [] };
    case 'org':
      return { sql: `l.scope = 'org' and l.org_id = ?`, params: [o.orgId] };
    case 'repo':
      return { sql: `l.scope = 'repo' and l.repo_id = ?`, params: [o.repoId] };
  }
}

/** The labels defined in one scope, by name. */
export function ownLabels(db: Db, o: LabelOwner): Promise<LabelRow[]> {
  const w = ofOwner(o);
  return db.execute<LabelRow[]>(
    `select ${LABEL} from labels l where ${w.sql} order by lower(l.name), l.id`,
    w.params,
  );
}

/** The label `id` when it is defined in this scope. */
export function ownLabel(db: Db, o: LabelOwner, id: number): Promise<LabelRow | undefined> {
  const w = ofOwner(o);
  return first<LabelRow>(db, `select ${LABEL} from labels l where ${w.sql} and l.id = ?`, [...w.params, id]);
}

/** Changes a label of this scope; undefined when the scope has no label `id`. */
export function updateLabel(
  db: Db,
  o: LabelOwner,
  id: number,
  c: { name?: string | undefined; color?: string | undefined; description?: string | undefined },
): Promise<LabelRow | undefined> {
  const w = ofOwner(o);
  const a = new Assignments();
  if (c.name !== undefined) a.add('name = ?', c.name);
  if (c.color !== undefined) a.add('color = ?', c.color);
  if (c.description !== undefined) a.add('description = ?', c.description);
  if (a.sql === '') return ownLabel(db, o, id);
  return first<LabelRow>(db, `update labels l set ${a.sql} where ${w.sql} and l.id = ? returning ${LABEL}`, [
    ...a.params,
    ...w.params,
    id,
  ]);
}

/** Deletes a label of this scope; undefined when the scope has no label `id`. */
export function deleteLabel(tx: Db, o: LabelOwner, id: number): Promise<LabelRow | undefined> {
  const w = ofOwner(o);
  return first<LabelRow>(tx, `delete from labels l where ${w.sql} and l.id = ? returning ${LABEL}`, [
    ...w.params,
    id,
  ]);
}

/**
 * Takes the label off every issue that carries it (the GIN index finds them); answers how many.
 * `updated_at` stays: a catalog change is not a change of the issues (docs/web.md, Labels).
 */
export function unlabelIssues(tx: Db, labelId: number): Promise<number> {
  return count(
    tx,
    `with changed as (
       update issues set label_ids = array_remove(label_ids, ?) where label_ids @> array[?]::int[]
       returning 1)
     select count(*)::int as n from changed`,
    [labelId, labelId],
  );
}

/**
 * Locks these labels against deletion until the transaction ends (an issue taking one commits
 * before a deletion clears it from the issues, or after the deletion, when it is gone); answers
 * the ids still there. A rename does not wait (it takes no key lock).
 */
export async function lockLabels(tx: Db, ids: readonly number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await tx.execute<{ id: number }[]>(
    'select id from labels where id = any(?::int[]) for key share',
    [intArray(ids)],
  );
  return new Set(rows.map((r) => r.id));
}

/** How many issues carry each of these labels, in every repository or in one. */
export async function labelUse(
  db: Db,
  ids: readonly number[],
  repoId?: number,
): Promise<Map<number, number>> {
  if (ids.length === 0) return new Map();
  const rows = await db.execute<{ id: number; n: number }[]>(
    `select x.id, count(*)::int as n from issues i, unnest(i.label_ids) x(id)
      where i.label_ids && ?::int[] and x.id = any(?::int[])${repoId === undefined ? '' : ' and i.repo_id = ?'}
      group by x.id`,
    [intArray(ids), intArray(ids), ...(repoId === undefined ? [] : [repoId])],
  );
  return new Map(rows.map((r) => [r.id, r.n]));
}

/** Every label of a repository's catalog, shadowed ones included: by name, most specific first. */
export function catalogAll(db: Db, c: CatalogOf): Promise<LabelRow[]> {
  return db.execute<LabelRow[]>(
    `select ${LABEL} from labels l where ${CATALOG} order by lower(l.name), ${SCOPE_RANK}`,
    [c.orgId, c.repoId],
  );
}

/**
 * How many of the repository's issues carry a label of each (lower-cased) name among `ids` (its
 * catalog's, shadowed ones included): what the issue list's `label` filter finds for the name.
 */
export async function useByName(
  db: Db,
  repoId: number,
  ids: readonly number[],
): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const rows = await db.execute<{ name: string; n: number }[]>(
    `select lower(l.name) as name, count(distinct i.id)::int as n
       from issues i join labels l on l.id = any(i.label_ids)
      where i.repo_id = ? and i.label_ids && ?::int[] and l.id = any(?::int[])
      group by lower(l.name)`,
    [repoId, intArray(ids), intArray(ids)],
  );
  return new Map(rows.map((r) => [r.name, r.n]));
}
