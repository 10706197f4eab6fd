import { first, type Db } from '../db/query.ts';
import { isoTime, textArray } from '../db/sql.ts';
import type { ProtectionRule, PushAllow } from './rules.ts';

/** The queries of protected refs (`ref_protections`): a repository's rules, and their changes. */

type Row = Omit<ProtectionRule, 'created_at' | 'push'> & { push: PushAllow; created_at: Date | string };

const COLUMNS = `id, pattern, fast_forward_only, allow_deletion, push, require_pipeline, required_contexts, created_at`;

const toRule = (r: Row): ProtectionRule => ({ ...r, created_at: isoTime(r.created_at) });

/** Every rule of the repository, oldest first. */
export async function listRules(db: Db, repoId: number): Promise<ProtectionRule[]> {
  const rows = await db.execute<Row[]>(
    `select ${COLUMNS} from ref_protections where repo_id = ? order by id`,
    [repoId],
  );
  return rows.map(toRule);
}

export async function getRule(db: Db, repoId: number, id: number): Promise<ProtectionRule | undefined> {
  const row = await first<Row>(db, `select ${COLUMNS} from ref_protections where repo_id = ? and id = ?`, [
    repoId,
    id,
  ]);
  return row === undefined ? undefined : toRule(row);
}

export type RuleFields = Omit<ProtectionRule, 'id' | 'created_at'>;

/** Inserts a rule; a pattern the repository already has violates `ref_protections_pattern`. */
export async function insertRule(tx: Db, repoId: number, f: RuleFields): Promise<ProtectionRule> {
  const rows = await tx.execute<Row[]>(
    `insert into ref_protections
       (repo_id, pattern, fast_forward_only, allow_deletion, push, require_pipeline, required_contexts)
     values (?, ?, ?, ?, ?::jsonb, ?, ?::text[]) returning ${COLUMNS}`,
    [
      repoId,
      f.pattern,
      f.fast_forward_only,
      f.allow_deletion,
      JSON.stringify(f.push),
      f.require_pipeline,
      textArray(f.required_contexts),
    ],
  );
  return toRule(rows[0]!);
}

/** Replaces a rule's fields; undefined when the repository has no such rule. */
export async function updateRule(
  tx: Db,
  repoId: number,
  id: number,
  f: RuleFields,
): Promise<ProtectionRule | undefined> {
  const rows = await tx.execute<Row[]>(
    `update ref_protections set pattern = ?, fast_forward_only = ?, allow_deletion = ?, push = ?::jsonb,
            require_pipeline = ?, required_contexts = ?::text[]
      where repo_id = ? and id = ? returning ${COLUMNS}`,
    [
      f.pattern,
      f.fast_forward_only,
      f.allow_deletion,
      JSON.stringify(f.push),
      f.require_pipeline,
      textArray(f.required_contexts),
      repoId,
      id,
    ],
  );
  return rows[0] === undefined ? undefined : toRule(rows[0]);
}

/** Deletes a rule; false when the repository has no such rule. */
export async function deleteRule(tx: Db, repoId: number, id: number): Promise<boolean> {
  const rows = await tx.execute<{ id: number }[]>(
    'delete from ref_protections where repo_id = ? and id = ? returning id',
    [repoId, id],
  );
  return rows.length > 0;
}
