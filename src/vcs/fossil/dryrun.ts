/**
 * Fossil's dry-run merge without a check-out: one SQL statement finds both heads, the commit
 * counts, the pivot (the most recent common ancestor, as `fossil merge` picks it) and every path
 * the source changed since the pivot with its three versions; only files changed on both sides
 * need their contents, merged by Fossil's own `fossil 3-way-merge` in a temporary directory. The
 * repository is only read (a check-out would register itself in the repository's config).
 *
 * Fossil's merge rules by path: a change on one side is taken; the same change on both is no
 * change; a file edited on one side and deleted on the other stays deleted (Fossil keeps the
 * deletion, it is not a conflict); a file added on both sides with different contents, a binary
 * file changed on both sides, or overlapping edits are conflicts. Renames are followed only by the
 * real merge (which remains authoritative: `merge` reports its own conflicts).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { FOSSIL } from '../constants.ts';
import { runCommand, withTempDir } from '../process/run.ts';

/** One path the source changed since the pivot: file hashes (null = absent) and permissions. */
export type Changed = {
  f: string;
  p: string | null;
  t: string | null;
  s: string | null;
  pp: string | null;
  tp: string | null;
  sp: string | null;
};

/** A SQL fragment listing `Changed` rows as a JSON array, given SQL expressions of the three check-in uuids. */
export function changedFilesSql(pivot: string, target: string, source: string): string {
  const files = (uuid: string) => `SELECT filename, uuid, perm FROM files_of_checkin(${uuid})`;
  return `(WITH pf AS (${files(pivot)}), tf AS (${files(target)}), sf AS (${files(source)}),
      names(filename) AS (SELECT filename FROM pf UNION SELECT filename FROM tf UNION SELECT filename FROM sf)
    SELECT json_group_array(json_object('f', n.filename, 'p', pf.uuid, 't', tf.uuid, 's', sf.uuid,
      'pp', pf.perm, 'tp', tf.perm, 'sp', sf.perm))
    FROM names n LEFT JOIN pf ON pf.filename = n.filename LEFT JOIN tf ON tf.filename = n.filename
      LEFT JOIN sf ON sf.filename = n.filename
    WHERE sf.uuid IS NOT pf.uuid OR sf.perm IS NOT pf.perm)`;
}

/** Fossil treats a file with a NUL byte or a very long line as binary and does not merge it. */
function binary(data: Buffer): boolean {
  if (data.includes(0)) return true;
  let start = 0;
  for (;;) {
    const nl = data.indexOf(10, start);
    const end = nl < 0 ? data.length : nl;
    if (end - start > 8191) return true;
    if (nl < 0) return false;
    start = nl + 1;
  }
}

export type DryRun = { conflicts: string[]; changed: boolean };

/**
 * Applies Fossil's rules to the changed paths. `contents` loads file contents by hash (only for
 * files changed on both sides); `tmpDir` holds the three-way merges.
 */
export async function dryRun(
  rows: Changed[],
  contents: (hashes: string[]) => Promise<Map<string, Buffer>>,
  opts: { tmpDir: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<DryRun> {
  const conflicts: string[] = [];
  let changed = false;
  const toMerge: Changed[] = [];
  for (const r of rows) {
    // Only the permission (executable bit) of this file changed on the source side.
    const permOnly = r.sp !== r.tp && r.tp === r.pp && r.t !== null;
    if (r.s === r.p) changed ||= permOnly;
    else if (r.t === r.p)
      changed = true; // only the source changed it (also added or deleted): taken
    else if (r.t === r.s)
      changed ||= permOnly; // the same change on both sides
    else if (r.p === null)
      conflicts.push(r.f); // added on both sides, differently
    else if (r.s === null)
      changed = true; // deleted by the source, edited by the target: deleted
    else if (r.t !== null) toMerge.push(r); // edited on both sides (deleted by the target: stays deleted)
  }
  if (toMerge.length > 0) {
    const data = await contents([...new Set(toMerge.flatMap((r) => [r.p ?? '', r.t ?? '', r.s ?? '']))]);
    await withTempDir(opts.tmpDir, 'fossil-3way-', async (dir) => {
      for (const [i, r] of toMerge.entries()) {
        const [p, t, s] = [r.p, r.t, r.s].map((h) => data.get(h ?? '') ?? Buffer.alloc(0)) as [
          Buffer,
          Buffer,
          Buffer,
        ];
        if (binary(p) || binary(t) || binary(s)) {
          conflicts.push(r.f);
          continue;
        }
        const names = ['base', 'local', 'other', 'merged'].map((n) => path.join(dir, `${i}.${n}`));
        const [base, local, other, merged] = names as [string, string, string, string];
        await Promise.all([fs.writeFile(base, p), fs.writeFile(local, t), fs.writeFile(other, s)]);
        const r3 = await runCommand(FOSSIL.bin, ['3-way-merge', base, local, other, merged], {
          env: opts.env,
          timeoutMs: opts.timeoutMs,
          cwd: dir,
        });
        if (r3.code !== 0)
          throw new Error(`fossil 3-way-merge failed (exit ${r3.code}): ${r3.stderr.trim()}`);
        if (/merge conflict/i.test(`${r3.stdout.toString('utf8')}${r3.stderr}`)) conflicts.push(r.f);
        else if (!(await fs.readFile(merged)).equals(t)) changed = true;
      }
    });
  }
  return { conflicts: conflicts.sort(), changed };
}
