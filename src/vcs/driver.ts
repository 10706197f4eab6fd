/**
 * The contract of a VCS driver. Each kind has one folder (`git/`, `hg/`, `fossil/`) whose
 * `driver.ts` exports its `VcsDriver` (Mercurial's made from the server's process pool, which
 * its push bookkeeping uses); `index.ts` puts them together per server (`createVcs`). Callers
 * never switch on the kind: what differs between Git, Mercurial and Fossil is behind these
 * calls. How processes are started and kept (spawner, persistent processes, CGI and WSGI
 * backends, the pool) is `process/`'s business, shared by the kinds.
 *
 * Repositories are named by their storage path `dir` (a bare git directory, an hg repository, a
 * fossil file). Nothing here knows about HTTP, the database or webhooks: the driver answers facts
 * (refs, commits, which refs moved) and the callers turn them into responses and events.
 *
 * Locking. "Push lock" below means: call only while holding the repository's push lock, that is
 * inside `RepoChanges` (src/repos/changes.ts), the one path that changes a repository. Those calls
 * either change the repository or must not see a change half applied. Every other call only reads
 * and may run at any time, also while a push is running.
 *
 * Errors. Unless a call says otherwise, a VCS command that fails throws (`VcsCommandFailed` from
 * process/run.ts, or the error of process/process.ts); "not found" is never an exception except
 * where documented: readers throw `ReadNotFound`, operations throw `RefNotFound` for unknown refs
 * of a merge and `InvalidRefName` for a tag name the VCS refuses.
 */
import type { Socket } from 'node:net';
import type { ArchiveFormat, OpenedFile } from './process/stream.ts';
import type { VcsConstants, VcsKind } from './constants.ts';
import type { OpsOptions, VcsOps } from './ops.ts';
import type { RepoReader } from './reader.ts';
import type { CgiResult } from './process/cgi.ts';
import type { BackendRequest, VcsTransport } from './transport.ts';

/** The refs of a repository at one moment: what change detection compares before and after. */
export type Snapshot = {
  tip: string;
  /**
   * Git: branch -> head. Mercurial: named branch -> its heads (closed ones too) joined by ',',
   * oldest first. Fossil: branch -> newest leaf.
   */
  branches: Map<string, string>;
  bookmarks: Map<string, string>;
  tags: Map<string, string>;
  /** Mercurial: tip revision number; Fossil: highest artifact rid. New commits lie above it. */
  mark: number;
};

export type CommitInfo = {
  id: string;
  message: string;
  /** `date`: ISO 8601 UTC when the VCS's date parses, else as the VCS printed it. */
  author: { name: string; email: string; date: string };
};

/**
 * A branch or bookmark that moved (or appeared). `before` and `after` are the ids a push event
 * reports: git and Fossil the ref's old and new head ('' when created); Mercurial the
 * repository's tip before ('' when the ref is new) and after, as its push events always did.
 */
export type BranchMove = {
  type: 'branch' | 'bookmark';
  name: string;
  isDefault: boolean;
  before: string;
  after: string;
  created: boolean;
  /** The commit the ref names now: what CI builds. */
  head: string;
  /** Commits the ref gained, newest first, at most the `maxCommits` asked for. */
  commits: CommitInfo[];
  /**
   * How many commits it gained; a driver may stop counting at `maxCommits + 1`, since beyond the
   * list a push event only tells whether there were more (a first push of a long history then
   * reads 51 commits, not all of them).
   */
  total: number;
};

/** A ref a pull request may name whose head changed (`oldHead` '' when it named nothing before). */
export type HeadMove = { oldHead: string; head: string };

/** A tag that was created or moved; `commit` is undefined when the target could not be read. */
export type TagMove = { type: 'tag'; name: string; target: string; commit: CommitInfo | undefined };

export type RefMove = BranchMove | TagMove;

export type MoveOptions = {
  /** The repository's default branch (a move of it is `isDefault`). */
  defaultBranch: string;
  /** Most commits listed per move (the rest is only counted). */
  maxCommits: number;
};

/** A file read with a size cap: its text, or only its size when it is above the cap. */
export type CappedFile = string | { tooLarge: number };

export interface VcsDriver {
  readonly kind: VcsKind;
  readonly constants: VcsConstants;

  /**
   * Creates an empty repository at `dest`, which must not exist (its parent is created). `name`
   * (`org/repo`) is recorded where the VCS keeps one a clone shows (Fossil's `project-name`).
   */
  init(dest: string, name?: string): Promise<void>;

  /**
   * A reader for the contents API. Its persistent process starts on the first read; the server
   * keeps readers in its process pool (`Vcs.reader`). Reads throw `ReadNotFound` (see reader.ts).
   */
  openReader(dir: string): RepoReader;

  /**
   * Requests at a clone URL: which wire-protocol request it is, and the backend serving it (a CGI
   * program per request, or a pooled WSGI worker).
   */
  readonly transport: VcsTransport;

  /**
   * Optional: serves a clone URL request somewhere else than in this process, instead of
   * `transport.backend` (the remote driver: on the repository's storage node, vcs/remote/). It
   * behaves as a local run does (`serveBackend`): status and headers onto `b.res`, the body to
   * `b.res` or `b.output`, the response left open; `nice` is the backends' niceness.
   */
  serve?(b: BackendRequest, nice: number): Promise<CgiResult>;

  /**
   * Push lock. Repairs what an interrupted write left (stale locks, an abandoned transaction) so
   * the next push works; answers what was repaired (empty when the repository was clean).
   */
  recover(dir: string): Promise<string[]>;

  /**
   * Optional; no lock, changes nothing. A push to `dir` is being received: start what its
   * bookkeeping (`snapshot`, `moves`, `filesAt`) needs, so that it is ready once the push holds
   * the lock (Mercurial: the repository's command server, a Python start).
   */
  prepare?(dir: string): void;

  /** Push lock. The refs now (outside the lock a push may be half applied). */
  snapshot(dir: string): Promise<Snapshot>;

  /**
   * Push lock (it reads the new commits `after` names). The refs that moved from `before` to
   * `after`, with the commits each gained: branch and bookmark moves first (Mercurial: bookmarks,
   * then named branches), then tags. Deleted refs are not reported.
   */
  moves(dir: string, before: Snapshot, after: Snapshot, opts: MoveOptions): Promise<RefMove[]>;

  /**
   * The head of every name a pull request's source or target may be, at a snapshot, as
   * `VcsOps.resolveRef` resolves that name: git and Fossil branches; Mercurial bookmarks, named
   * branches (newest head) and `@` standing for the default named branch while no bookmark has
   * that name. What the pull requests of a change compare (`headMoves` in refs.ts).
   */
  refHeads(snapshot: Snapshot): Map<string, string>;

  /**
   * One file's content at each of several revisions (the pipeline file at the commits a push
   * moved refs to), read in one run where the VCS allows: revision -> content, undefined when the
   * revision or the file does not exist, `{ tooLarge: size }` when the file is larger than
   * `maxBytes` (its content is then not read at all).
   */
  filesAt(
    dir: string,
    revs: readonly string[],
    file: string,
    maxBytes: number,
  ): Promise<Map<string, CappedFile | undefined>>;

  /**
   * A file's bytes at a commit (a full id the reader resolved; the file known to exist, `size`
   * as `RepoReader.file` answered it), streamed from a process of its own (`openFile`,
   * process/stream.ts), so a large file neither sits in memory nor holds the repository's pooled
   * reader, and is read once. Answers when the size and the first `head` bytes are known; ending
   * the body early kills the process, which runs `nice` niceness steps below the server
   * (process/priority.ts). With `socket` (a plain HTTP/1.x connection the response goes
   * out on), the driver adds `handOff`: git and Mercurial write to the non-blocking socket
   * themselves; Fossil's `fossil cat` cannot, so its pipe goes on to `cat`, which makes the
   * connection blocking: `closes`, the response then closes its connection.
   */
  catFile(
    dir: string,
    commit: string,
    file: string,
    known: { size: number | undefined; head: number; nice: number; socket?: Socket },
  ): Promise<OpenedFile>;

  /**
   * The files of commit `commit` (a full id, resolved by the caller) as a gzipped tarball or a
   * zip whose entries lie below `prefix/`, streamed as the VCS writes it. No lock (a read). Runs
   * `nice` niceness steps below the server, like `catFile`. The process starts when the stream is
   * first read; `signal` aborting stops it (the stream then fails). Callers go through
   * `TransportServers.archive`, which puts it under the transports' concurrency cap.
   */
  archive(
    dir: string,
    commit: string,
    format: ArchiveFormat,
    prefix: string,
    nice: number,
    signal?: AbortSignal,
  ): AsyncIterable<Buffer>;

  /**
   * Only kinds whose VCS numbers no commits itself (Git; `RepoReader.revs` is absent there): the
   * commits reachable from the refs now and from none of `known`, parents before children. A
   * read (no lock); under the push lock, with the heads of the snapshot before a change, the
   * commits the change brought. Every commit of the history when `known` is empty.
   */
  arrivals?(dir: string, known: readonly string[]): Promise<string[]>;

  /**
   * The merge, dry-run merge, tag and ref operations (ops.ts documents which mutate and so need
   * the push lock). Made once per server; their persistent processes are in the server's pool.
   */
  createOps(opts: OpsOptions): VcsOps;
}
