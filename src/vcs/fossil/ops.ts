/**
 * Fossil operations on a repository file. Lookups and ancestry are SQL (`fossil sql --readonly`,
 * every name as a hex literal); merges run in a throw-away check-out of the repository
 * (`fossil open --workdir` under the caller's temporary directory, with its own FOSSIL_HOME so the
 * server's global Fossil configuration is never touched), closed and removed in every outcome.
 *
 * Fossil cannot move a branch pointer: a branch's head is its newest open leaf. So a "fast-forward"
 * (the target has not diverged) is a merge check-in on the target branch whose files equal the
 * source head's, and `fastForward` is always false; `ff-only` still refuses a diverged target.
 * A squash is the same merge committed without its merge link (one parent).
 */
import path from 'node:path';
import fs from 'node:fs/promises';
import {
  cleanAuthor,
  defaultMergeMessage,
  InvalidRefName,
  isHexId,
  plausibleRefName,
  RefNotFound,
  type DeleteOutcome,
  type MergeCheck,
  type MergeInput,
  type MergeOutcome,
  type TagInput,
  type TagOutcome,
  type VcsOps,
} from '../ops.ts';
import { runChecked, runCommand, withTempDir } from '../run.ts';

const ENV = { ...process.env, USER: 'triad', LANG: 'C.UTF-8' };

/** A SQL text literal that cannot break out of the statement whatever it holds. */
function sqlText(s: string): string {
  return `CAST(X'${Buffer.from(s, 'utf8').toString('hex')}' AS TEXT)`;
}

const BRANCH_TAG = `(SELECT tagid FROM tag WHERE tagname = 'branch')`;
const CLOSED_TAG = `(SELECT tagid FROM tag WHERE tagname = 'closed')`;

/** Open leaves of a branch, newest first (check-ins without a branch tag are on trunk). */
function openLeaves(branch: string): string {
  return `SELECT l.rid AS rid FROM leaf l JOIN event e ON e.objid = l.rid
    WHERE coalesce((SELECT value FROM tagxref x WHERE x.rid = l.rid AND x.tagid = ${BRANCH_TAG} AND x.tagtype > 0), 'trunk') = ${sqlText(branch)}
      AND NOT EXISTS (SELECT 1 FROM tagxref x WHERE x.rid = l.rid AND x.tagid = ${CLOSED_TAG} AND x.tagtype > 0)
    ORDER BY e.mtime DESC`;
}

/**
 * The repository user Fossil acts as (it refuses to commit or tag as a user it does not know):
 * Triad's admin user `triad`, else a setup user, else any user. The check-in's recorded user is
 * the author (`--user-override`).
 */
const ACTOR = `(SELECT login FROM user ORDER BY login = 'triad' DESC, cap GLOB '*s*' DESC, uid LIMIT 1)`;

const headOf = (branch: string) => `(SELECT rid FROM (${openLeaves(branch)}) LIMIT 1)`;
const uuidOf = (rid: string) => `(SELECT uuid FROM blob WHERE rid = ${rid})`;

type Conflicts = { files: string[]; changed: boolean };

/**
 * Conflicts `fossil merge` reports: "***** N merge conflicts in F", "***** Cannot merge binary
 * file F", and "WARNING: no common ancestor for F" (added on both sides; Fossil keeps the target's).
 */
function mergeConflicts(output: string): string[] {
  const files = new Set<string>();
  for (const raw of output.split('\n')) {
    const line = raw.trimEnd();
    const m =
      /^\*{5} (?:\d+ merge conflicts? in|Cannot merge (?:binary file|symlink)) (.+)$/.exec(line) ??
      /^WARNING: no common ancestor for (.+)$/.exec(line);
    if (m?.[1] !== undefined) files.add(m[1]);
  }
  return [...files].sort();
}

export class FossilOps implements VcsOps {
  readonly kind = 'fossil' as const;
  private readonly timeoutMs: number;
  private readonly tmpDir: string;

  constructor(opts: { tmpDir: string; timeoutMs: number }) {
    this.timeoutMs = opts.timeoutMs;
    this.tmpDir = opts.tmpDir;
  }

  close(): void {
    // no persistent processes
  }

  /** One read-only SQL statement answering one JSON value per row. */
  private async query<T>(file: string, sql: string): Promise<T[]> {
    const input = `.mode list\n.headers off\n${sql.replace(/\s*\n\s*/g, ' ').trim()};\n`;
    const r = await runChecked('fossil', ['sql', '-R', file, '--readonly'], {
      env: ENV,
      input,
      timeoutMs: this.timeoutMs,
    });
    if (r.stderr.trim() !== '') throw new Error(`fossil sql: ${r.stderr.trim()}`);
    return r.stdout
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as T);
  }

  async resolveRef(dir: string, name: string): Promise<string | undefined> {
    if (!plausibleRefName(name)) return undefined;
    const [row] = await this.query<{ id: string | null }>(
      dir,
      `SELECT json_object('id', ${uuidOf(headOf(name))})`,
    );
    return row?.id ?? undefined;
  }

  async resolveCommit(dir: string, rev: string): Promise<string | undefined> {
    if (!plausibleRefName(rev)) return undefined;
    const hex = isHexId(rev) ? rev.toLowerCase() : '';
    const ci = `SELECT objid FROM event WHERE type = 'ci'`;
    const [row] = await this.query<{
      byId: string | null;
      branch: string | null;
      tag: string | null;
      prefix: string[];
    }>(
      dir,
      `SELECT json_object(
         'byId', (SELECT uuid FROM blob WHERE uuid = ${sqlText(hex)} AND length(uuid) = length(${sqlText(hex)}) AND rid IN (${ci})),
         'branch', ${uuidOf(headOf(rev))},
         'tag', (SELECT b.uuid FROM tagxref x JOIN blob b ON b.rid = x.rid JOIN event e ON e.objid = x.rid
                  WHERE x.tagid = (SELECT tagid FROM tag WHERE tagname = ${sqlText(`sym-${rev}`)}) AND x.tagtype > 0
                  ORDER BY e.mtime DESC LIMIT 1),
         'prefix', json((SELECT json_group_array(uuid) FROM (SELECT uuid FROM blob
                  WHERE ${hex === '' ? '0' : `uuid >= ${sqlText(hex)} AND uuid < ${sqlText(`${hex}g`)}`} AND rid IN (${ci}) LIMIT 2))))`,
    );
    if (row === undefined) return undefined;
    const full = /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(hex);
    if (full && row.byId !== null) return row.byId;
    return row.branch ?? row.tag ?? (row.prefix.length === 1 ? row.prefix[0] : undefined);
  }

  /** Heads of both refs and the commit counts, in one statement. */
  private async heads(file: string, source: string, target: string) {
    if (!plausibleRefName(source)) throw new RefNotFound('source', source);
    if (!plausibleRefName(target)) throw new RefNotFound('target', target);
    const [row] = await this.query<{
      s: string | null;
      t: string | null;
      ahead: number;
      behind: number;
      login: string;
    }>(
      file,
      `WITH RECURSIVE h(s, t) AS (SELECT ${headOf(source)}, ${headOf(target)}),
         sa(rid) AS (SELECT s FROM h WHERE s IS NOT NULL UNION SELECT pid FROM plink JOIN sa ON plink.cid = sa.rid),
         ta(rid) AS (SELECT t FROM h WHERE t IS NOT NULL UNION SELECT pid FROM plink JOIN ta ON plink.cid = ta.rid)
       SELECT json_object('s', ${uuidOf('(SELECT s FROM h)')}, 't', ${uuidOf('(SELECT t FROM h)')},
         'ahead', (SELECT count(*) FROM sa WHERE rid NOT IN ta), 'behind', (SELECT count(*) FROM ta WHERE rid NOT IN sa),
         'login', ${ACTOR})`,
    );
    if (row?.s === null || row?.s === undefined) throw new RefNotFound('source', source);
    if (row.t === null) throw new RefNotFound('target', target);
    return { src: row.s, tgt: row.t, ahead: row.ahead, behind: row.behind, login: row.login };
  }

  /**
   * Opens a check-out of `target` in a fresh directory, merges `source` into it and hands it to
   * `then` (which may commit); the check-out is closed and its directory removed afterwards.
   */
  private async inCheckout<T>(
    file: string,
    { tgt: target, src: source, login }: { tgt: string; src: string; login: string },
    then: (co: string, env: NodeJS.ProcessEnv, merged: Conflicts) => Promise<T>,
  ): Promise<T> {
    const repo = path.resolve(file);
    return withTempDir(this.tmpDir, 'fossil-merge-', async (made) => {
      // Fossil records the check-out under its canonical path (config "ckout:<path>/").
      const tmp = await fs.realpath(made);
      const home = path.join(tmp, 'home');
      const co = path.join(tmp, 'co');
      await fs.mkdir(home);
      const env = { ...ENV, USER: login, FOSSIL_HOME: home };
      const opts = { env, timeoutMs: this.timeoutMs, cwd: co };
      await runChecked('fossil', ['open', '--nosync', '--workdir', co, repo, target], { ...opts, cwd: tmp });
      try {
        const merge = await runChecked('fossil', ['merge', source], opts);
        const files = mergeConflicts(`${merge.stdout.toString('utf8')}\n${merge.stderr}`);
        const changes = await runChecked('fossil', ['changes'], opts);
        const changed = changes.stdout
          .toString('utf8')
          .split('\n')
          .some((l) => l.trim() !== '' && !/^(MERGED_WITH|CHERRYPICK|BACKOUT|INTEGRATE)\s/.test(l));
        return await then(co, env, { files, changed });
      } finally {
        // Forget the check-out in the repository's config (fossil close), even on failure.
        const closed = await runCommand('fossil', ['close', '--force'], opts).catch(() => undefined);
        if (closed?.code !== 0) {
          await runCommand(
            'fossil',
            ['sql', '-R', repo, `DELETE FROM config WHERE name = ${sqlText(`ckout:${co}/`)}`],
            {
              env,
              timeoutMs: this.timeoutMs,
            },
          ).catch(() => undefined);
        }
      }
    });
  }

  async checkMerge(dir: string, source: string, target: string): Promise<MergeCheck> {
    const h = await this.heads(dir, source, target);
    const base = { commitsAhead: h.ahead, commitsBehind: h.behind, sourceHead: h.src, targetHead: h.tgt };
    if (h.ahead === 0) return { state: 'behind', conflictedFiles: [], ...base };
    const merged = await this.inCheckout(dir, h, async (_co, _env, m) => m);
    if (merged.files.length > 0) return { state: 'conflict', conflictedFiles: merged.files, ...base };
    return { state: merged.changed ? 'clean' : 'empty', conflictedFiles: [], ...base };
  }

  async merge(dir: string, input: MergeInput): Promise<MergeOutcome> {
    const h = await this.heads(dir, input.source, input.target);
    if (input.expectedHead !== undefined && input.expectedHead.toLowerCase() !== h.src) {
      return { kind: 'head_moved', head: h.src };
    }
    if (input.expectedTargetHead !== undefined && input.expectedTargetHead.toLowerCase() !== h.tgt) {
      return { kind: 'target_moved', head: h.tgt };
    }
    if (h.ahead === 0) return { kind: 'nothing_to_merge' };
    if (input.style === 'ff-only' && h.behind > 0) return { kind: 'not_fast_forward' };
    const message = input.message?.trim() || defaultMergeMessage(input.source, input.target, input.style);
    const user = cleanAuthor(input.author).name;
    return this.inCheckout(dir, h, async (co, env, m): Promise<MergeOutcome> => {
      if (m.files.length > 0) return { kind: 'conflict', conflictedFiles: m.files };
      const opts = { env, timeoutMs: this.timeoutMs, cwd: co };
      if (input.style === 'squash') {
        if (!m.changed) return { kind: 'nothing_to_merge' };
        // The same check-in without the merge link: Fossil records merge parents in vmerge.
        await runChecked('fossil', ['sql', 'DELETE FROM localdb.vmerge'], opts);
      }
      await fs.writeFile(path.join(path.dirname(co), 'message'), message);
      const args = ['commit', '-M', path.join(path.dirname(co), 'message'), '--user-override', user];
      args.push(
        '--no-warnings',
        '--no-prompt',
        '--no-verify',
        '--allow-conflict',
        '--allow-older',
        '--allow-empty',
      );
      const r = await runCommand('fossil', args, opts);
      const out = r.stdout.toString('utf8');
      const id = /^New_Version: ([0-9a-f]+)$/m.exec(out)?.[1];
      if (r.code !== 0 || id === undefined) {
        if (/fork/i.test(out + r.stderr)) {
          return { kind: 'target_moved', head: (await this.resolveRef(dir, input.target)) ?? '' };
        }
        throw new Error(`fossil commit failed (exit ${r.code}): ${(r.stderr || out).trim().slice(0, 500)}`);
      }
      return { kind: 'merged', mergeCommit: id, fastForward: false };
    });
  }

  async deleteRef(dir: string, name: string, expectedHead?: string): Promise<DeleteOutcome> {
    if (!plausibleRefName(name)) return 'not_found';
    const rows = await this.query<{ id: string; login: string }>(
      dir,
      `SELECT json_object('id', b.uuid, 'login', ${ACTOR}) FROM (${openLeaves(name)}) l JOIN blob b ON b.rid = l.rid`,
    );
    const head = rows[0]?.id;
    if (head === undefined) return 'not_found';
    if (expectedHead !== undefined && expectedHead.toLowerCase() !== head) return 'moved';
    // Fossil has no branch deletion: a "closed" tag on every open leaf closes the branch.
    for (const { id, login } of rows) {
      await runChecked('fossil', ['tag', 'add', '--raw', '-R', dir, 'closed', id], {
        env: { ...ENV, USER: login },
        timeoutMs: this.timeoutMs,
      });
    }
    return 'deleted';
  }

  async createTag(dir: string, input: TagInput): Promise<TagOutcome> {
    if (!plausibleRefName(input.name) || /^(wiki|tkt|event)-/.test(input.name) || /\s/.test(input.name)) {
      throw new InvalidRefName(`invalid tag name: ${input.name}`);
    }
    const [row] = await this.query<{ id: string | null; login: string }>(
      dir,
      `SELECT json_object('login', ${ACTOR}, 'id', (SELECT b.uuid FROM tagxref x JOIN blob b ON b.rid = x.rid
        JOIN event e ON e.objid = x.rid WHERE x.tagid = (SELECT tagid FROM tag WHERE tagname = ${sqlText(`sym-${input.name}`)})
        AND x.tagtype > 0 ORDER BY e.mtime DESC LIMIT 1))`,
    );
    if (row?.id !== null && row?.id !== undefined) return { kind: 'tag_exists', commit: row.id };
    const commit = await this.resolveCommit(dir, input.target);
    if (commit === undefined) return { kind: 'not_found' };
    const user = cleanAuthor(input.author).name;
    // `fossil tag add NAME ID` writes a control artifact with the symbolic tag sym-NAME.
    await runChecked('fossil', ['tag', 'add', '--user-override', user, '-R', dir, input.name, commit], {
      env: { ...ENV, USER: row?.login ?? 'triad' },
      timeoutMs: this.timeoutMs,
    });
    return { kind: 'created', name: input.name, commit };
  }

  async isAncestor(dir: string, ancestor: string, descendant: string): Promise<boolean> {
    const full = /^([0-9a-f]{40}|[0-9a-f]{64})$/i;
    if (!full.test(ancestor) || !full.test(descendant)) return false;
    const [row] = await this.query<{ r: number }>(
      dir,
      `WITH RECURSIVE a(rid) AS (SELECT rid FROM blob WHERE uuid = ${sqlText(descendant.toLowerCase())}
         UNION SELECT pid FROM plink JOIN a ON plink.cid = a.rid)
       SELECT json_object('r', EXISTS (SELECT 1 FROM a WHERE rid = (SELECT rid FROM blob WHERE uuid = ${sqlText(ancestor.toLowerCase())})))`,
    );
    return row?.r === 1;
  }
}
