/**
 * Fossil operations on a repository file. Lookups, ancestry and the dry-run merge read the
 * repository with SQL (every name as a hex literal; see dryrun.ts) on the repository's pooled
 * reader: the same long-lived `fossil sql --readonly` process the contents reads use (reader.ts,
 * in the server's process pool), so a read pays no process start and no repository open. Each statement is its own
 * SQLite read transaction, so it sees every check-in committed before it (a push's own pull
 * request updates read through the process that was live before the push; after the push
 * `RepoChanges` drops it anyway). Only `fossil 3-way-merge` and the writes spawn processes. Merges
 * run in a throw-away check-out of the repository (`fossil open --workdir` under the caller's
 * temporary directory, with its own FOSSIL_HOME so the server's global Fossil configuration is
 * never touched), closed and removed in every outcome.
 *
 * Fossil cannot move a branch pointer: a branch's head is its newest open leaf. So a "fast-forward"
 * (the target has not diverged) is a merge check-in on the target branch whose files equal the
 * source head's, and `fastForward` is always false; `ff-only` still refuses a diverged target.
 * A squash is the same merge committed without its merge link (one parent). */
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
  type OpsOptions,
  type TagInput,
  type TagOutcome,
  type VcsOps,
} from '../ops.ts';
import { runChecked, runCommand, withTempDir } from '../process/run.ts';
import { FOSSIL } from '../constants.ts';
import { changedFilesSql, dryRun, type Changed } from './dryrun.ts';
import { FossilReader } from './reader.ts';
import { sqlText } from './sql.ts';

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
  private readonly reader: OpsOptions['reader'];

  constructor(opts: OpsOptions) {
    this.timeoutMs = opts.timeoutMs;
    this.tmpDir = opts.tmpDir;
    this.reader = opts.reader;
  }

  /** One read-only SQL statement answering one JSON value per row, on the repository's pooled reader. */
  private async query<T>(file: string, sql: string): Promise<T[]> {
    const reader = this.reader(file);
    if (!(reader instanceof FossilReader)) throw new Error(`not a Fossil reader: ${file}`);
    return reader.sqlRows<T>(sql);
  }

  /**
   * A statement that always answers one row. No row means it failed (an error whose stderr had
   * not arrived with the answer): that is thrown, never read as "nothing there".
   */
  private async one<T>(file: string, sql: string): Promise<T> {
    const [row] = await this.query<T>(file, sql);
    if (row === undefined) throw new Error('fossil sql: a statement answered no row');
    return row;
  }

  async resolveRef(dir: string, name: string): Promise<string | undefined> {
    if (!plausibleRefName(name)) return undefined;
    const row = await this.one<{ id: string | null }>(
      dir,
      `SELECT json_object('id', ${uuidOf(headOf(name))})`,
    );
    return row.id ?? undefined;
  }

  async resolveRefs(dir: string, names: readonly string[]): Promise<(string | undefined)[]> {
    const ok = names.filter(plausibleRefName);
    if (ok.length === 0) return names.map(() => undefined);
    const row = await this.one<(string | null)[]>(
      dir,
      `SELECT json_array(${ok.map((n) => uuidOf(headOf(n))).join(', ')})`,
    );
    const heads = new Map(ok.map((n, i) => [n, row[i] ?? undefined]));
    return names.map((n) => heads.get(n));
  }

  async resolveCommit(dir: string, rev: string): Promise<string | undefined> {
    if (!plausibleRefName(rev)) return undefined;
    const hex = isHexId(rev) ? rev.toLowerCase() : '';
    const ci = `SELECT objid FROM event WHERE type = 'ci'`;
    const row = await this.one<{
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
    const full = /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(hex);
    if (full && row.byId !== null) return row.byId;
    return row.branch ?? row.tag ?? (row.prefix.length === 1 ? row.prefix[0] : undefined);
  }

  /**
   * Heads of both refs, the commit counts and the user to act as, in one statement; with `files`
   * also the paths the source changed since the pivot (the dry run's input).
   */
  private async heads(file: string, source: string, target: string, files = false) {
    if (!plausibleRefName(source)) throw new RefNotFound('source', source);
    if (!plausibleRefName(target)) throw new RefNotFound('target', target);
    type Row = {
      s: string | null;
      t: string | null;
      ahead: number;
      behind: number;
      login: string;
      files?: Changed[];
    };
    const changed = files
      ? `, 'files', json(${changedFilesSql(uuidOf('(SELECT rid FROM piv)'), uuidOf('(SELECT t FROM h)'), uuidOf('(SELECT s FROM h)'))})`
      : '';
    const row = await this.one<Row>(
      file,
      // One walk over the parent links marks each ancestor with the side(s) it is reached from
      // (1 source, 2 target, 3 both); the pivot is the most recent common ancestor.
      `WITH RECURSIVE h(s, t) AS (SELECT ${headOf(source)}, ${headOf(target)}),
         w(rid, side) AS (SELECT s, 1 FROM h WHERE s IS NOT NULL UNION SELECT t, 2 FROM h WHERE t IS NOT NULL
           UNION SELECT pid, side FROM plink JOIN w ON plink.cid = w.rid),
         m(rid, sides) AS MATERIALIZED (SELECT rid, sum(side) FROM w GROUP BY rid),
         piv(rid) AS (SELECT m.rid FROM m JOIN event e ON e.objid = m.rid WHERE sides = 3 ORDER BY e.mtime DESC LIMIT 1)
       SELECT json_object('s', ${uuidOf('(SELECT s FROM h)')}, 't', ${uuidOf('(SELECT t FROM h)')},
         'ahead', (SELECT count(*) FROM m WHERE sides = 1), 'behind', (SELECT count(*) FROM m WHERE sides = 2),
         'login', ${ACTOR}${changed})`,
    );
    if (row.s === null) throw new RefNotFound('source', source);
    if (row.t === null) throw new RefNotFound('target', target);
    return {
      src: row.s,
      tgt: row.t,
      ahead: row.ahead,
      behind: row.behind,
      login: row.login,
      files: row.files ?? [],
    };
  }

  /** Contents of file artifacts by hash. */
  private async contents(file: string, hashes: string[]): Promise<Map<string, Buffer>> {
    const list = hashes.filter((h) => /^[0-9a-f]{40,64}$/.test(h)).map((h) => `'${h}'`);
    if (list.length === 0) return new Map();
    const rows = await this.query<{ h: string; d: string }>(
      file,
      `SELECT json_object('h', uuid, 'd', hex(content(uuid))) FROM blob WHERE uuid IN (${list.join(', ')})`,
    );
    return new Map(rows.map((r) => [r.h, Buffer.from(r.d, 'hex')]));
  }

  /**
   * Opens a check-out of `target` in a fresh directory, merges `source` into it and hands it to
   * `then` (which may commit); the check-out is closed and its directory removed afterwards.
   */
  private async inCheckout<T>(
    file: string,
    { tgt: target, src: source, login }: { tgt: string; src: string; login: string },
    needChanges: boolean,
    then: (co: string, env: NodeJS.ProcessEnv, merged: Conflicts) => Promise<T>,
  ): Promise<T> {
    const repo = path.resolve(file);
    return withTempDir(this.tmpDir, 'fossil-merge-', async (made) => {
      // Fossil records the check-out under its canonical path (config "ckout:<path>/").
      const tmp = await fs.realpath(made);
      const home = path.join(tmp, 'home');
      const co = path.join(tmp, 'co');
      await fs.mkdir(home);
      const env = { ...FOSSIL.env, USER: login, FOSSIL_HOME: home };
      const opts = { env, timeoutMs: this.timeoutMs, cwd: co };
      await runChecked(FOSSIL.bin, ['open', '--nosync', '--workdir', co, repo, target], {
        ...opts,
        cwd: tmp,
      });
      try {
        const merge = await runChecked(FOSSIL.bin, ['merge', source], opts);
        const report = `${merge.stdout.toString('utf8')}\n${merge.stderr}`;
        const files = mergeConflicts(report);
        // A conflict summary without a file line this code knows: name the files `fossil changes`
        // marks as conflicted, so nothing with conflict markers is ever committed.
        const unparsed = files.length === 0 && /merge conflicts?/.test(report);
        // Whether the merge changed any file (a squash of nothing is refused); plain merges commit anyway.
        const changes = needChanges || unparsed ? await runChecked(FOSSIL.bin, ['changes'], opts) : undefined;
        if (unparsed) {
          const marked = (changes?.stdout.toString('utf8') ?? '')
            .split('\n')
            .filter((l) => l.startsWith('CONFLICT'));
          files.push(
            ...(marked.length > 0 ? marked.map((l) => l.replace(/^CONFLICT\s+/, '')) : ['(unknown)']),
          );
        }
        const changed =
          changes === undefined ||
          changes.stdout
            .toString('utf8')
            .split('\n')
            .some((l) => l.trim() !== '' && !/^(MERGED_WITH|CHERRYPICK|BACKOUT|INTEGRATE)\s/.test(l));
        return await then(co, env, { files, changed });
      } finally {
        // Forget the check-out in the repository's config (fossil close), even on failure.
        const closed = await runCommand(FOSSIL.bin, ['close', '--force'], opts).catch(() => undefined);
        if (closed?.code !== 0) {
          await runCommand(
            FOSSIL.bin,
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
    const h = await this.heads(dir, source, target, true);
    const base = { commitsAhead: h.ahead, commitsBehind: h.behind, sourceHead: h.src, targetHead: h.tgt };
    if (h.ahead === 0) return { state: 'behind', conflictedFiles: [], ...base };
    const r = await dryRun(h.files, (hashes) => this.contents(dir, hashes), {
      tmpDir: this.tmpDir,
      env: FOSSIL.env,
      timeoutMs: this.timeoutMs,
    });
    if (r.conflicts.length > 0) return { state: 'conflict', conflictedFiles: r.conflicts, ...base };
    return { state: r.changed ? 'clean' : 'empty', conflictedFiles: [], ...base };
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
    return this.inCheckout(dir, h, input.style === 'squash', async (co, env, m): Promise<MergeOutcome> => {
      if (m.files.length > 0) return { kind: 'conflict', conflictedFiles: m.files };
      const opts = { env, timeoutMs: this.timeoutMs, cwd: co };
      if (input.style === 'squash') {
        if (!m.changed) return { kind: 'nothing_to_merge' };
        // The same check-in without the merge link: Fossil records merge parents in vmerge.
        await runChecked(FOSSIL.bin, ['sql', 'DELETE FROM localdb.vmerge'], opts);
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
      const r = await runCommand(FOSSIL.bin, args, opts);
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
      await runChecked(FOSSIL.bin, ['tag', 'add', '--raw', '-R', dir, 'closed', id], {
        env: { ...FOSSIL.env, USER: login },
        timeoutMs: this.timeoutMs,
      });
    }
    return 'deleted';
  }

  async createTag(dir: string, input: TagInput): Promise<TagOutcome> {
    if (!plausibleRefName(input.name) || /^(wiki|tkt|event)-/.test(input.name) || /\s/.test(input.name)) {
      throw new InvalidRefName(`invalid tag name: ${input.name}`);
    }
    const row = await this.one<{ id: string | null; login: string }>(
      dir,
      `SELECT json_object('login', ${ACTOR}, 'id', (SELECT b.uuid FROM tagxref x JOIN blob b ON b.rid = x.rid
        JOIN event e ON e.objid = x.rid WHERE x.tagid = (SELECT tagid FROM tag WHERE tagname = ${sqlText(`sym-${input.name}`)})
        AND x.tagtype > 0 ORDER BY e.mtime DESC LIMIT 1))`,
    );
    if (row.id !== null) return { kind: 'tag_exists', commit: row.id };
    const commit = await this.resolveCommit(dir, input.target);
    if (commit === undefined) return { kind: 'not_found' };
    const user = cleanAuthor(input.author).name;
    // `fossil tag add NAME ID` writes a control artifact with the symbolic tag sym-NAME.
    await runChecked(FOSSIL.bin, ['tag', 'add', '--user-override', user, '-R', dir, input.name, commit], {
      env: { ...FOSSIL.env, USER: row.login },
      timeoutMs: this.timeoutMs,
    });
    return { kind: 'created', name: input.name, commit };
  }

  async isAncestor(dir: string, ancestor: string, descendant: string): Promise<boolean> {
    const full = /^([0-9a-f]{40}|[0-9a-f]{64})$/i;
    if (!full.test(ancestor) || !full.test(descendant)) return false;
    const row = await this.one<{ r: number }>(
      dir,
      `WITH RECURSIVE a(rid) AS (SELECT rid FROM blob WHERE uuid = ${sqlText(descendant.toLowerCase())}
         UNION SELECT pid FROM plink JOIN a ON plink.cid = a.rid)
       SELECT json_object('r', EXISTS (SELECT 1 FROM a WHERE rid = (SELECT rid FROM blob WHERE uuid = ${sqlText(ancestor.toLowerCase())})))`,
    );
    return row.r === 1;
  }
}
