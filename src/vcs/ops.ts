/**
 * VCS-level operations behind pull requests (mergeability, merge, source deletion, manual-merge
 * detection) and releases (tag creation), one implementation per kind: `git/ops.ts` (plumbing on
 * the bare repository, no working tree), `hg/ops.ts` (a persistent command server with Triad's
 * `triadops` extension: merges in memory, no working directory) and `fossil/ops.ts` (SQL reads,
 * merges in a throw-away check-out of the repository file). docs/vcs-operations.md describes the
 * mappings.
 *
 * Refs: git and Fossil branches; Mercurial bookmarks, else `@` standing for the default named
 * branch while no bookmark has that name, else named branches (hg/triadops.py). Names come
 * from users: a name that cannot exist (see `plausibleRefName`) names nothing, and every name
 * reaches a VCS as data (a full ref name after `refs/heads/`, a dictionary lookup inside the
 * Mercurial extension, a hex SQL literal), never as an option, a revision expression or a revset.
 *
 * Locking: the calls marked "mutates" change the repository and must run inside the `mutate`
 * function of `RepoChanges.change` (src/repos/changes.ts, the one repository-change path), which
 * holds the repository's push lock, so that the snapshots taken before and after see exactly this
 * change; it also records the events and invalidates pooled readers. The others only read (a dry-run merge works in memory, in the object store or on SQL) and
 * may run at any time, also during a push.
 */
import type { VcsKind } from './constants.ts';
import type { RepoReader } from './reader.ts';

export type Author = { name: string; email: string };

/**
 * `behind`: the source head is already contained in the target (nothing to merge). `empty`: the
 * source has commits the target lacks, but merging them changes no file of the target. `conflict`:
 * the VCS's own merge cannot combine the two sides; `conflictedFiles` lists the paths.
 */
export type MergeState = 'clean' | 'conflict' | 'behind' | 'empty';

export type MergeCheck = {
  state: MergeState;
  /** Sorted repository paths; empty unless `state` is `conflict`. */
  conflictedFiles: string[];
  /** Commits reachable from the source head and not from the target head. */
  commitsAhead: number;
  /** Commits reachable from the target head and not from the source head. */
  commitsBehind: number;
  sourceHead: string;
  targetHead: string;
};

/**
 * `merge`: fast-forward when the target has not diverged (git, and Mercurial when both heads are
 * on the same named branch), else a merge commit; `ff-only`: fast-forward or `not_fast_forward`;
 * `squash`: one new single-parent commit on the target with the combined change.
 */
export type MergeStyle = 'merge' | 'ff-only' | 'squash';

export type MergeInput = {
  source: string;
  target: string;
  style: MergeStyle;
  /** Commit message of a merge or squash commit; a default names source and target. */
  message?: string;
  author: Author;
  /** The source head the caller saw; another head gives `head_moved`. */
  expectedHead?: string;
  /** The target head the caller saw; another head gives `target_moved`. */
  expectedTargetHead?: string;
};

export type MergeOutcome =
  /** `mergeCommit` is the target's new head (the source head itself after a fast-forward). */
  | { kind: 'merged'; mergeCommit: string; fastForward: boolean }
  /** Nothing was written. */
  | { kind: 'conflict'; conflictedFiles: string[] }
  | { kind: 'head_moved'; head: string }
  | { kind: 'target_moved'; head: string }
  | { kind: 'not_fast_forward' }
  /** The source head is already contained in the target (or a squash would change nothing). */
  | { kind: 'nothing_to_merge' };

export type TagInput = {
  name: string;
  /** A commit id (full or an unambiguous prefix), a branch or bookmark, or a tag. */
  target: string;
  /** Git: an annotated tag with this message (lightweight without); Mercurial: the commit message. */
  message?: string;
  author: Author;
};

export type TagOutcome =
  /** `commit`: the tagged commit; Mercurial also names the `.hgtags` commit that records the tag. */
  | { kind: 'created'; name: string; commit: string; tagCommit?: string }
  /** A tag of that name exists (for Fossil also a branch: both are symbolic tags); `commit` is where it points. */
  | { kind: 'tag_exists'; commit: string }
  | { kind: 'not_found' };

export type DeleteOutcome = 'deleted' | 'not_found' | 'moved';

/** `checkMerge` / `merge` named a source or target ref that does not exist (HTTP 404 naming it). */
export class RefNotFound extends Error {
  readonly role: 'source' | 'target';
  readonly ref: string;
  constructor(role: 'source' | 'target', ref: string) {
    super(`${role} ref not found: ${ref}`);
    this.role = role;
    this.ref = ref;
  }
}

/** A name given for a ref to create is not acceptable to the VCS (HTTP 422). */
export class InvalidRefName extends Error {}

export interface VcsOps {
  readonly kind: VcsKind;

  /**
   * Head commit id of a branch (git, Fossil: the newest open leaf) or, for Mercurial, of a
   * bookmark, `@` standing for the default named branch, or a named branch (its newest head
   * without a bookmark, else its newest head); undefined when there is none (also for a name that
   * cannot exist).
   */
  resolveRef(dir: string, name: string): Promise<string | undefined>;

  /**
   * `resolveRef` of several names at once (one VCS process for git and Fossil), in their order:
   * what a pull request read needs (source and target heads).
   */
  resolveRefs(dir: string, names: readonly string[]): Promise<(string | undefined)[]>;

  /**
   * A commit named by a commit id (full or unambiguous prefix, at least 4 hex digits), a
   * branch/bookmark or a tag, in that order of preference for a name; undefined when none.
   */
  resolveCommit(dir: string, rev: string): Promise<string | undefined>;

  /**
   * Dry-run merge of `source` into `target`. Never changes refs or history visible to clients.
   * Throws `RefNotFound` for an unknown ref. No lock needed.
   */
  checkMerge(dir: string, source: string, target: string): Promise<MergeCheck>;

  /**
   * Mutates (push lock). Merges as `input.style` says; every outcome other than `merged` leaves
   * the repository unchanged. Throws `RefNotFound` for an unknown ref.
   */
  merge(dir: string, input: MergeInput): Promise<MergeOutcome>;

  /**
   * Mutates (push lock). Removes a branch (git) or bookmark (Mercurial); Fossil cannot delete a
   * branch and closes it instead (a `closed` tag on its open leaves), after which `resolveRef`
   * no longer finds it. With `expectedHead`, a ref at another commit is left alone (`moved`).
   */
  deleteRef(dir: string, name: string, expectedHead?: string): Promise<DeleteOutcome>;

  /**
   * Mutates (push lock). Creates tag `name` at the commit `target` names. Throws
   * `InvalidRefName` for a name the VCS refuses.
   */
  createTag(dir: string, input: TagInput): Promise<TagOutcome>;

  /**
   * True when commit `ancestor` is `descendant` or one of its ancestors (manual-merge detection:
   * the source head became reachable from the target). False when either id names no commit.
   */
  isAncestor(dir: string, ancestor: string, descendant: string): Promise<boolean>;
}

/** What each kind's operations are made with (`VcsDriver.createOps`, once per server). */
export type OpsOptions = {
  /** Parent of throw-away working directories (for example `<data dir>/tmp`); created on demand. */
  tmpDir: string;
  /** Time limit of one VCS command (and of one Mercurial command-server request). */
  timeoutMs: number;
  /** The server's pooled reader of a repository: Fossil's reads run on its `fossil sql` process. */
  reader: (dir: string) => RepoReader;
};

// ------------------------------------------------------------------ helpers for the drivers

/**
 * A ref name worth looking up or creating: 1-255 characters, no control characters, no leading
 * `-` (never an option), no leading or trailing white space. Each kind adds its own rules.
 */
export function plausibleRefName(name: string): boolean {
  return (
    name.length > 0 &&
    name.length <= 255 &&
    // eslint-disable-next-line no-control-regex
    !/[\u0000-\u001f\u007f]/.test(name) &&
    !name.startsWith('-') &&
    name.trim() === name
  );
}

/** A full or abbreviated commit id (hex, 4-64 digits). */
export function isHexId(rev: string): boolean {
  return /^[0-9a-f]{4,64}$/i.test(rev);
}

/** Author name and e-mail with the characters that would break an identity line removed. */
export function cleanAuthor(a: Author): Author {
  // eslint-disable-next-line no-control-regex
  const clean = (s: string) => s.replace(/[<>\u0000-\u001f\u007f]/g, '').trim();
  return { name: clean(a.name) || 'Triad', email: clean(a.email) };
}

export function defaultMergeMessage(source: string, target: string, style: MergeStyle): string {
  return style === 'squash' ? `Squashed merge of ${source} into ${target}` : `Merge ${source} into ${target}`;
}
