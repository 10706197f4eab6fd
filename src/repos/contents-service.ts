import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import type { RepoHandle, RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import type { Page } from '../http/pagination.ts';
import type { Vcs } from '../vcs/index.ts';
import { openPlainFile, type OpenedFile } from '../vcs/process/stream.ts';
import {
  BadPath,
  blobContent,
  DEFAULT_LIMITS,
  normalisePath,
  plausibleRev,
  ReadNotFound,
  type Changeset,
  type LogEntry,
  type ContentLimits,
  type RepoReader,
  type ReadAhead,
} from '../vcs/reader.ts';
import type { RawCache } from './raw-cache.ts';
import type { CommitRevs } from './commit-revs.ts';
import type { ReposService } from './service.ts';

/** Where a repository is stored and its driver (never changes: kept per repository id). */
type Stored = Pick<RepoHandle, 'vcs' | 'path' | 'driver'>;

/**
 * Repository contents (tree, blob, log, changeset) read through the pooled VCS readers.
 * Decisions where the spec is silent: a missing path, a tree of a file and a blob of a directory
 * answer 404 `not_found`; a path escaping the repository answers 400 `validation_failed`; the
 * default revision `tip` of a repository without commits answers 404 "repository is empty", but
 * its log is an empty page.
 */
/** A log read: from `rev`, one page. */
export type LogQuery = { rev: string; page: number; per_page: number };
/** A commit with its `rev` (the earlier API variant's integer revision), when it was asked for. */
export type Revved<T> = T & { rev?: number };
/** What a read adds: `revs`, each commit's `rev` (for the earlier API variant). */
export type ReadOpts = { revs?: boolean };

export class ContentsService {
  private readonly repos: ReposService;
  private readonly vcs: Pick<Vcs, 'reader' | 'driver'>;
  /** Repository id -> storage path and kind (neither ever changes for an id). */
  private readonly where = new Map<number, Stored>();

  private readonly limits: ContentLimits;
  /** Niceness added to the raw download processes (`TRIAD_BACKEND_NICE`). */
  private readonly nice: number;
  /** Where larger raw downloads are kept for the next (`TRIAD_RAW_CACHE_BYTES`); none when off. */
  private readonly cache: RawCache | undefined;
  /** The commits' `rev` numbers, for reads that ask for them. */
  private readonly revs: Pick<CommitRevs, 'of'> | undefined;

  constructor(
    repos: ReposService,
    vcs: Pick<Vcs, 'reader' | 'driver'>,
    limits: ContentLimits = DEFAULT_LIMITS,
    opts: { nice?: number; cache?: RawCache; revs?: Pick<CommitRevs, 'of'> } = {},
  ) {
    this.repos = repos;
    this.vcs = vcs;
    this.limits = limits;
    this.nice = opts.nice ?? 0;
    this.cache = opts.cache;
    this.revs = opts.revs;
  }

  /** `items` with each commit's `rev` (`id` names the commit). */
  async numbered<T extends { id: string }>(target: RepoTarget, items: T[]): Promise<Revved<T>[]> {
    if (this.revs === undefined || items.length === 0) return items;
    const w = await this.location(target);
    const revs = await this.revs.of(
      { id: target.repo.id, ...w },
      items.map((i) => i.id),
    );
    return items.map((i) => {
      const rev = revs.get(i.id);
      return rev === undefined ? i : { ...i, rev };
    });
  }

  private async location(t: RepoTarget): Promise<Stored> {
    let w = this.where.get(t.repo.id);
    if (w === undefined) {
      const { vcs, path, driver } = await this.repos.handle(t);
      w = { vcs, path, driver };
      if (this.where.size > 10_000) this.where.clear();
      this.where.set(t.repo.id, w);
    }
    return w;
  }

  private async reader(target: RepoTarget): Promise<RepoReader> {
    const w = await this.location(target);
    return this.vcs.reader(w.vcs, w.path);
  }

  private async read<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof ReadNotFound) {
        throw e.kind === 'empty'
          ? new ApiError(404, 'not_found', 'repository is empty')
          : ApiError.notFound(e.kind === 'path' ? 'path' : e.kind);
      }
      throw e;
    }
  }

  private static path(raw: unknown): string {
    try {
      return normalisePath(Array.isArray(raw) ? raw.map(String) : typeof raw === 'string' ? raw : undefined);
    } catch (e) {
      if (e instanceof BadPath) throw ApiError.validation(`path: ${e.message}`);
      throw e;
    }
  }

  private static rev(rev: string): string {
    if (!plausibleRev(rev)) throw ApiError.validation('query.rev: must not contain control characters');
    return rev;
  }

  /**
   * The commit `rev` names, or undefined (the read then answers why: no such revision, empty).
   * `ahead`: the read that follows at that commit (`ahead.tree(...)` etc.), which a reader that
   * can (storage nodes) makes in the same round trip.
   */
  async commit(target: RepoTarget, rev: string, ahead?: ReadAhead): Promise<string | undefined> {
    const r = ContentsService.rev(rev);
    const reader = await this.reader(target);
    if (ahead !== undefined && reader.resolveThen !== undefined) {
      return this.read(() => reader.resolveThen?.(r, ahead) ?? reader.resolve(r));
    }
    return this.read(() => reader.resolve(r));
  }

  /** What `tree`, `blob`, `log` and `changeset` will read after the revision, for `commit`'s `ahead`. */
  readonly ahead = {
    tree: (rawPath: unknown): ReadAhead => ({ method: 'tree', args: [ContentsService.path(rawPath)] }),
    blob: (rawPath: unknown): ReadAhead => ({
      method: 'blob',
      args: [ContentsService.path(rawPath), this.limits.blobMaxBytes],
    }),
    log: (q: Pick<LogQuery, 'page' | 'per_page'>): ReadAhead => ({
      method: 'log',
      args: [q.page, q.per_page],
    }),
    changeset: (): ReadAhead => ({ method: 'changeset', args: [this.limits] }),
  };

  async tree(target: RepoTarget, rawPath: unknown, rev: string) {
    const p = ContentsService.path(rawPath);
    const r = ContentsService.rev(rev);
    const reader = await this.reader(target);
    return this.read(() => reader.tree(r, p));
  }

  async blob(target: RepoTarget, rawPath: unknown, rev: string) {
    const p = ContentsService.path(rawPath);
    const r = ContentsService.rev(rev);
    if (p === '') throw ApiError.notFound('file');
    const reader = await this.reader(target);
    return this.read(() => reader.blob(r, p, this.limits.blobMaxBytes));
  }

  /**
   * A file's bytes at a revision, whole, for streaming: the pooled reader resolves the revision
   * and checks the file (the same 404s as a blob read); a small file (at most `RAW_INLINE_BYTES`)
   * comes whole from it, with no process of its own. A larger one is not read by the reader: its
   * bytes come from a process of their own (`catFile`), at that commit, which also tells the size
   * when the reader could not, and whose first bytes decide whether the file is text. The file is
   * read once, and the repository's reader is not held while it is. With `socket` (the response's
   * connection, when it may be handed over), `handOff` is there when the kind's producer can
   * write the file to it itself. A larger file kept by the cache comes from there (`cat` writes
   * it); one that is not is kept once its download ended (`RawCache`). Undefined when
   * `unchanged` says the client's copy of this version of the file is current.
   */
  async raw(
    target: RepoTarget,
    rawPath: unknown,
    rev: string,
    opts: { socket?: Socket | undefined; unchanged?: (version: string) => boolean } = {},
  ) {
    const p = ContentsService.path(rawPath);
    const r = ContentsService.rev(rev);
    if (p === '') throw ApiError.notFound('file');
    const w = await this.location(target);
    const reader = this.vcs.reader(w.vcs, w.path);
    const { commit, size, data, object } = await this.read(() => reader.file(r, p, RAW_INLINE_BYTES));
    // The file's id names its bytes (else its commit and path do): a current copy is not read.
    if (opts.unchanged?.(object ?? `${commit}:${p}`) === true) return undefined;
    const socket = opts.socket;
    const file: OpenedFile =
      data !== undefined
        ? { size: data.length, head: data, body: Readable.from([data]) }
        : await this.openLarger(w, commit, p, { size, object, socket });
    const sniff = blobContent(p, file.head, file.size, RAW_SNIFF_BYTES);
    return {
      size: file.size,
      contentType: sniff.encoding === 'utf-8' ? 'text/plain; charset=utf-8' : 'application/octet-stream',
      body: file.body,
      handOff: file.handOff,
      closes: file.handOff !== undefined && file.closes === true,
    };
  }

  /**
   * A larger file's bytes: from the cache when it keeps them (`cat` writes a large one to the
   * connection), else from the store, and kept once they were all sent. A cache that fails is
   * passed by: the store is read.
   */
  private async openLarger(
    w: Stored,
    commit: string,
    p: string,
    f: { size: number | undefined; object: string | undefined; socket: Socket | undefined },
  ): Promise<OpenedFile> {
    const opts = { head: RAW_SNIFF_BYTES, nice: this.nice, socket: f.socket };
    const fromStore = (o: typeof opts) => w.driver.catFile(w.path, commit, p, { ...o, size: f.size });
    const { cache } = this;
    const object = f.object;
    if (cache === undefined || object === undefined) return fromStore(opts);
    const kept = await cache.get(w.path, object, f.size);
    if (kept !== undefined) {
      const file = await openPlainFile(kept.file, {
        ...opts,
        size: kept.size,
        // `cat` closes the connection: a smaller file is sent by the server, on a kept one
        ...(kept.size < CAT_MIN_BYTES ? { socket: undefined } : {}),
      }).catch(() => undefined); // (gone since it was looked up)
      if (file !== undefined) return file;
    }
    const file = await fromStore(opts);
    if (!cache.keeps(file.size)) return file;
    return whenSent(file, () =>
      cache.put(
        w.path,
        object,
        file.size,
        async () => (await fromStore({ ...opts, socket: undefined })).body,
      ),
    );
  }

  async log(target: RepoTarget, q: LogQuery, opts: ReadOpts = {}): Promise<Page<Revved<LogEntry>>> {
    const r = ContentsService.rev(q.rev);
    const reader = await this.reader(target);
    // an empty repository's history (at `tip`) is an empty list, not a missing revision
    const out = await this.read(() =>
      reader.log(r, q.page, q.per_page).catch((e: unknown) => {
        if (e instanceof ReadNotFound && e.kind === 'empty') return { entries: [], total: 0 };
        throw e;
      }),
    );
    const items = opts.revs === true ? await this.numbered(target, out.entries) : out.entries;
    return { items, total: out.total, page: q.page, perPage: q.per_page };
  }

  async changeset(target: RepoTarget, rev: string, opts: ReadOpts = {}): Promise<Revved<Changeset>> {
    const r = ContentsService.rev(rev);
    const reader = await this.reader(target);
    const cs = await this.read(() => reader.changeset(r, this.limits));
    return opts.revs === true ? (await this.numbered(target, [cs]))[0]! : cs;
  }
}

/** `file`, calling `then` once its bytes were all sent (by the hand-off, or read through `body`). */
function whenSent(file: OpenedFile, then: () => void): OpenedFile {
  const it = file.body[Symbol.asyncIterator]();
  const body: AsyncIterableIterator<Buffer> = {
    [Symbol.asyncIterator]: () => body,
    next: async () => {
      const r = await it.next();
      if (r.done === true) then();
      return r;
    },
    return: async () => {
      await it.return?.();
      return { done: true, value: undefined };
    },
  };
  const handOff = file.handOff;
  return { ...file, body, ...(handOff === undefined ? {} : { handOff: () => handOff().then(then) }) };
}

/** Bytes of a file's start that decide whether the raw download is text (as git's heuristic). */
const RAW_SNIFF_BYTES = 8000;

/** Raw files from the cache this large or larger are written to the connection by `cat`. */
const CAT_MIN_BYTES = 4 * 1024 * 1024;

/** Raw files up to this size are read by the pooled reader, whole (milliseconds of its time). */
const RAW_INLINE_BYTES = 256 * 1024;
