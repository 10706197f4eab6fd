import { spawnChild } from './process/spawner.ts';
import { isUtf8 } from 'node:buffer';

/**
 * The read contract every VCS reader fulfils (tree, blob, log, changeset), its errors, and the
 * helpers the readers share. Persistent processes: process/process.ts; their pool:
 * process/pool.ts; capped diffs: diff.ts.
 */

// ------------------------------------------------------------------ shapes

export type TreeEntry = { name: string; is_dir: boolean; size: number };
/**
 * `size` is the file's full size; `content` holds at most the blob cap's worth of it, cut at a
 * character boundary for text, and `truncated` says whether it was cut.
 */
export type BlobContent = {
  path: string;
  content: string;
  size: number;
  encoding: 'utf-8' | 'base64';
  truncated: boolean;
};
export type LogEntry = {
  id: string;
  short_id: string;
  author: string;
  date: string;
  subject: string;
  message: string;
  branch: string;
  tags: string[];
};
/**
 * `diff_truncated`: the diff is incomplete (a file shown by its header only, or sections left out
 * at the total cap); `diff_truncated_files`: the files shown by their header only.
 */
export type DiffResult = { diff: string; diff_truncated: boolean; diff_truncated_files: string[] };
export type Changeset = LogEntry & DiffResult;

/** Size caps of contents reads (bytes); see `DEFAULT_LIMITS` and docs/api.md "Limits". */
export type ContentLimits = {
  /** Blob reads return at most this much content (`truncated: true` beyond). */
  blobMaxBytes: number;
  /** A file whose either version, or whose diff section, is larger is shown by its header only. */
  diffMaxFileBytes: number;
  /** The whole diff: a section that would pass it is left out with every later one. */
  diffMaxBytes: number;
};
export const DEFAULT_LIMITS: ContentLimits = {
  blobMaxBytes: 4 * 1024 * 1024,
  diffMaxFileBytes: 1024 * 1024,
  diffMaxBytes: 4 * 1024 * 1024,
};
export type LogPage = { entries: LogEntry[]; total: number };

/**
 * What a three-dot compare asks of `RepoReader.compare`: a page of the range's commits (oldest
 * first; `perPage` 0 reads none) and, with `limits`, the diff from the merge base to the head.
 */
export type CompareOptions = { page: number; perPage: number; limits?: ContentLimits | undefined };
/**
 * A three-dot compare of two commits (git's `base...head`): `mergeBase` is their most recent
 * common ancestor (undefined when the histories are unrelated: the diff is then against an empty
 * tree); `commits` the asked page of the commits reachable from the head and not from the base,
 * oldest first, `totalCommits` all of them; `diff` the capped diff from the merge base to the
 * head (undefined when no `limits` were given).
 */
export type Comparison = {
  mergeBase: string | undefined;
  commits: LogEntry[];
  totalCommits: number;
  diff: DiffResult | undefined;
};

export const REF_TYPES = ['branch', 'bookmark', 'tag'] as const;
export type RefType = (typeof REF_TYPES)[number];
/** A ref's head commit: the fields of its log entry that name and describe it. */
export type RefCommit = Pick<LogEntry, 'id' | 'short_id' | 'subject' | 'author' | 'date'>;
/** One branch, bookmark or tag with its head commit; `default` marks the mainline ref. */
export type RefEntry = { name: string; type: RefType; default: boolean; commit: RefCommit };
export type RefPage = { entries: RefEntry[]; total: number };

/**
 * Read access to one repository. `resolve` answers undefined for an unknown revision; the other
 * reads throw `ReadNotFound` (unknown revision, missing path, wrong kind of path, empty
 * repository). `path` is normalised by `normalisePath` before it reaches a driver ('' = root).
 */
/**
 * What `RepoReader.file` answers: the commit, the size when known, the bytes of a small file, and
 * `object`, the id of the file's content in the repository's store (Git's blob, Mercurial's file
 * node, Fossil's artifact; small files' too): within a repository the same id always names the
 * same bytes (a raw download's `ETag` is made of it).
 */
export type RawFile = { commit: string; size: number | undefined; data?: Buffer; object?: string };

/**
 * A read a caller will make at the commit a revision resolves to (`RepoReader.resolveThen`): the
 * method and its arguments after the revision.
 */
export type ReadAhead = { method: 'tree' | 'blob' | 'log' | 'changeset'; args: unknown[] };

export interface RepoReader {
  resolve(rev: string): Promise<string | undefined>;
  /**
   * Optional (the storage nodes' remote reader): `resolve(rev)`, and in the same round trip the
   * read `ahead` names at the commit it found (at `rev` when none), kept for a call of exactly that
   * read at that commit, which then costs no second round trip. A read at a commit id is the same
   * whenever it is made, so what is kept cannot be stale.
   */
  resolveThen?(rev: string, ahead: ReadAhead): Promise<string | undefined>;
  tree(rev: string, path: string): Promise<TreeEntry[]>;
  /** At most `maxBytes` of content (default `DEFAULT_LIMITS.blobMaxBytes`); larger files are cut. */
  blob(rev: string, path: string, maxBytes?: number): Promise<BlobContent>;
  /**
   * For a raw download: resolves the revision and checks that the path names a file there
   * (`ReadNotFound` as `blob` throws it), without reading the file. `commit` is the full id;
   * `size` the file's size when the reader knows it cheaply (Git: the object header; Fossil: the
   * blob table), undefined when only reading the file tells it (Mercurial). With `inline` (a
   * byte count), a file known cheaply to be no larger comes whole in `data` (`size` is then its
   * length): a small file's download needs no process of its own.
   */
  file(rev: string, path: string, inline?: number): Promise<RawFile>;
  log(rev: string, page: number, perPage: number): Promise<LogPage>;
  /**
   * The refs of one type, paged, each with its head commit, in name order (`byName`): Git
   * branches and tags (annotated tags by the commit they name); Mercurial open named branches
   * (the head a branch name resolves to: its newest open head), bookmarks and tags (`tip` left
   * out); Fossil open branches (their newest check-in) and tags (those `fossil tag list
   * --tagtype singleton` shows, a tag on several check-ins by its newest). `default` marks the
   * branch named `defaultBranch` and Mercurial's `@` bookmark. Undefined when the kind has no
   * refs of that type (bookmarks outside Mercurial). An empty repository has none.
   */
  refs(type: RefType, page: number, perPage: number, defaultBranch: string): Promise<RefPage | undefined>;
  /** The diff against the first parent, capped by `limits` (default `DEFAULT_LIMITS`). */
  changeset(rev: string, limits?: ContentLimits): Promise<Changeset>;
  /**
   * A three-dot compare of two commits, `base` and `head` full ids the caller resolved (see
   * `Comparison`; `ReadNotFound('revision')` when either names no commit). The diff has the form
   * and the caps of `changeset`'s. Commit lists are kept per pair (history is immutable), so
   * paging through a long range reads it once.
   */
  compare(base: string, head: string, opts: CompareOptions): Promise<Comparison>;
  /**
   * The VCS's own integer numbers of these commits (full ids), the earlier API variant's `rev`:
   * Mercurial's revision numbers, Fossil's rids (unique and stable within the repository; a
   * Mercurial revision number is as stable as its repository, which Triad never strips). Ids
   * naming no commit are left out. Absent where the VCS numbers no commits (Git: the numbers are
   * recorded as commits arrive, src/repos/commit-revs.ts).
   */
  revs?(ids: readonly string[]): Promise<Map<string, number>>;
  /** True while a request is queued or running (the pool closes no busy reader as idle). */
  busy(): boolean;
  /** Ends the persistent processes once queued work is done. */
  close(): void;
}

export type NotFoundKind = 'revision' | 'path' | 'file' | 'directory' | 'empty';

/** A read that names nothing: the HTTP layer answers 404. */
export class ReadNotFound extends Error {
  readonly kind: NotFoundKind;
  constructor(kind: NotFoundKind, message?: string) {
    super(message ?? (kind === 'empty' ? 'repository is empty' : `${kind} not found`));
    this.kind = kind;
  }
}

/** A request path that could escape the repository or is malformed: the HTTP layer answers 400. */
export class BadPath extends Error {}

// ------------------------------------------------------------------ helpers shared by drivers

/**
 * Normalises a repository path given as URL segments (Express 5 wildcard) or a string.
 * Rejects (BadPath) NUL and other control characters, backslashes, absolute paths and `..`
 * segments; drops empty and `.` segments. Returns '' for the repository root.
 */
export function normalisePath(input: string | readonly string[] | undefined): string {
  if (input === undefined) return '';
  const raw = typeof input === 'string' ? input : input.join('/');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) throw new BadPath('path must not contain control characters');
  if (raw.includes('\\')) throw new BadPath('path must not contain backslashes');
  if (raw.startsWith('/')) throw new BadPath('path must be relative to the repository root');
  const parts: string[] = [];
  for (const seg of raw.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') throw new BadPath('path must not contain ".." segments');
    parts.push(seg);
  }
  return parts.join('/');
}

/** A revision as text a driver may look up; anything else names nothing (404). */
export function plausibleRev(rev: string): boolean {
  // eslint-disable-next-line no-control-regex
  return rev.length > 0 && rev.length <= 256 && !/[\u0000-\u001f\u007f]/.test(rev);
}

/**
 * A blob answer from the file's bytes (or their first part) and its full size. Content beyond
 * `maxBytes` is cut; a cut text file ends before a character split by the cut, so it stays
 * UTF-8 (never turns into base64 because of the cut).
 */
export function blobContent(
  path: string,
  data: Buffer,
  size = data.length,
  maxBytes = DEFAULT_LIMITS.blobMaxBytes,
): BlobContent {
  let bytes = data.length > maxBytes ? data.subarray(0, maxBytes) : data;
  const cut = bytes.length < size;
  let text = !bytes.includes(0) && isUtf8(bytes);
  if (!text && cut && !bytes.includes(0)) {
    // A cut may split one multi-byte character (at most 3 bytes of it).
    for (let drop = 1; drop <= 3 && drop < bytes.length && !text; drop += 1) {
      if (isUtf8(bytes.subarray(0, bytes.length - drop))) {
        bytes = bytes.subarray(0, bytes.length - drop);
        text = true;
      }
    }
  }
  return {
    path,
    content: text ? bytes.toString('utf8') : bytes.toString('base64'),
    size,
    encoding: text ? 'utf-8' : 'base64',
    truncated: cut,
  };
}

/**
 * The first `max` bytes a command writes to stdout (the whole output when shorter); the command
 * is killed once enough is read, so a huge output is never held in memory.
 */
export async function readPrefix(
  cmd: string,
  args: string[],
  max: number,
  env?: NodeJS.ProcessEnv,
): Promise<Buffer> {
  const child = await spawnChild(cmd, args, { env: env ?? process.env, stdio: ['ignore', 'pipe', 'ignore'] });
  const stdout = child.stdout;
  if (stdout === null) throw new Error(`${cmd}: no output`);
  const parts: Buffer[] = [];
  let have = 0;
  try {
    for await (const d of stdout as AsyncIterable<Buffer>) {
      parts.push(d);
      have += d.length;
      if (have >= max) break;
    }
  } finally {
    if (have >= max) child.kill('SIGKILL');
    stdout.destroy();
  }
  if (have < max) {
    const { code, signal } = await child.exited;
    if (code !== 0) throw new Error(`${cmd} exited (${signal ?? code ?? '?'})`);
  }
  return Buffer.concat(parts, Math.min(have, max)).subarray(0, max);
}

export function isoUtc(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function splitMessage(message: string): { subject: string; message: string } {
  const m = message.replace(/\s+$/, '');
  return { subject: m.split('\n', 1)[0] ?? '', message: m };
}

/** Byte order of the names' UTF-8 (the order of `git for-each-ref`), for ref lists. */
export function byName<T>(list: T[], name: (item: T) => string): T[] {
  return list.sort((a, b) => Buffer.compare(Buffer.from(name(a)), Buffer.from(name(b))));
}

/** The head commit of a ref, from its log entry. */
export function refCommit({ id, short_id, subject, author, date }: RefCommit): RefCommit {
  return { id, short_id, subject, author, date };
}

/** The entries of page `page` of `list`, with the list's length. */
export function pageOf<T>(list: readonly T[], page: number, perPage: number): { items: T[]; total: number } {
  return { items: list.slice((page - 1) * perPage, page * perPage), total: list.length };
}

/** Dirs first, then files, each by name (code unit order, like the VCSs). */
export function sortEntries(entries: TreeEntry[]): TreeEntry[] {
  return entries.sort((a, b) =>
    a.is_dir !== b.is_dir ? (a.is_dir ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
}

/** Small LRU map (insertion order = recency). */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  private readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  get(k: K): V | undefined {
    const v = this.map.get(k);
    if (v !== undefined) {
      this.map.delete(k);
      this.map.set(k, v);
    }
    return v;
  }
  set(k: K, v: V): void {
    this.map.delete(k);
    this.map.set(k, v);
    while (this.map.size > this.max) {
      const first = this.map.keys().next();
      if (first.done === true) break;
      this.map.delete(first.value);
    }
  }
  clear(): void {
    this.map.clear();
  }
}
