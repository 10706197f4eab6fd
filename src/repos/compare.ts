import type { RepoHandle, RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import type { Page, PageQuery } from '../http/pagination.ts';
import { ByteLru } from '../vcs/byte-lru.ts';
import { parseDiff, parsedSize, type DiffFile, type ParsedDiff } from '../vcs/diff-files.ts';
import type { Vcs } from '../vcs/index.ts';
import { plausibleRev, ReadNotFound, type ContentLimits, type LogEntry } from '../vcs/reader.ts';
import type { ReposService } from './service.ts';

/** Commits a compare lists (the oldest first); `total_commits` counts them all. */
export const COMPARE_MAX_COMMITS = 250;
/** Files a compare or a pull request lists at most (the diff's byte caps apply first). */
export const COMPARE_MAX_FILES = 3000;

/** Two commits, as a compare names them after resolving: what the range is read between. */
export type CompareEnds = { base: string; head: string };

/** The files of a compare: the diff from the merge base to the head, split into files. */
export type ParsedCompare = ParsedDiff & CompareEnds & { mergeBase: string | undefined };

/** What `GET .../compare/:base...:head` answers. */
export type CompareResult = ParsedCompare & { commits: LogEntry[]; totalCommits: number };

/**
 * Three-dot compares (git's `base...head`, GitHub's compare): the commits reachable from the head
 * and not from the base, oldest first, and the diff from their merge base to the head, with the
 * caps of a changeset's diff (`TRIAD_DIFF_MAX_FILE_BYTES`, `TRIAD_DIFF_MAX_BYTES`), read through
 * the repository's pooled reader (`RepoReader.compare`). A name is resolved as a pull request's
 * ref first (a branch; for Mercurial a bookmark, `@` or a named branch), then as a tag or a
 * commit id (full or an unambiguous prefix); a name that names nothing is a 404 naming it. The
 * parsed diffs are kept by commit pair (64 MiB), so paging through a pull request's files or
 * loading them one by one on its page reads the diff once.
 */
export class CompareService {
  private readonly repos: Pick<ReposService, 'handle'>;
  private readonly vcs: Pick<Vcs, 'reader' | 'ops'>;
  private readonly limits: ContentLimits;
  private readonly parsed = new ByteLru<string, ParsedCompare>(64 * 1024 * 1024, (p) =>
    parsedSize(
      p,
      p.files.reduce((n, f) => n + f.lines.reduce((m, l) => m + l.length + 1, 0), 0),
    ),
  );

  constructor(repos: Pick<ReposService, 'handle'>, vcs: Pick<Vcs, 'reader' | 'ops'>, limits: ContentLimits) {
    this.repos = repos;
    this.vcs = vcs;
    this.limits = limits;
  }

  /** The commit a compare's `base` or `head` names (404 naming it when none). */
  async resolve(h: RepoHandle, name: string, role: 'base' | 'head'): Promise<string> {
    if (plausibleRev(name)) {
      const ops = this.vcs.ops(h.vcs);
      const id = (await ops.resolveRef(h.path, name)) ?? (await ops.resolveCommit(h.path, name));
      if (id !== undefined) return id;
    }
    throw ApiError.notFound(`${role} "${name}"`);
  }

  /** Both names resolved (the base's 404 first). */
  async ends(h: RepoHandle, base: string, head: string): Promise<CompareEnds> {
    return { base: await this.resolve(h, base, 'base'), head: await this.resolve(h, head, 'head') };
  }

  /** The compare of two names: the first commits of the range and its files. */
  async compare(t: RepoTarget, base: string, head: string): Promise<CompareResult> {
    const h = await this.repos.handle(t);
    const ends = await this.ends(h, base, head);
    const [commits, files] = await Promise.all([
      this.commits(h, ends, { page: 1, per_page: COMPARE_MAX_COMMITS }),
      this.files(h, ends),
    ]);
    return { ...files, commits: commits.items, totalCommits: commits.total };
  }

  /** A page of the range's commits, oldest first. */
  async commits(h: RepoHandle, ends: CompareEnds, q: PageQuery): Promise<Page<LogEntry>> {
    const r = await read(() =>
      this.vcs.reader(h.vcs, h.path).compare(ends.base, ends.head, { page: q.page, perPage: q.per_page }),
    );
    return { items: r.commits, total: r.totalCommits, page: q.page, perPage: q.per_page };
  }

  /** The range's files (at most `COMPARE_MAX_FILES`), read once per pair of commits and kept. */
  async files(h: RepoHandle, ends: CompareEnds): Promise<ParsedCompare> {
    const key = `${h.path}\u0000${ends.base}\u0000${ends.head}`;
    const kept = this.parsed.get(key);
    if (kept !== undefined) return kept;
    const r = await read(() =>
      this.vcs
        .reader(h.vcs, h.path)
        .compare(ends.base, ends.head, { page: 1, perPage: 0, limits: this.limits }),
    );
    const parsed = parseDiff(r.diff ?? { diff: '', diff_truncated: false, diff_truncated_files: [] });
    const over = parsed.files.length > COMPARE_MAX_FILES;
    const out: ParsedCompare = {
      ...ends,
      mergeBase: r.mergeBase,
      files: over ? parsed.files.slice(0, COMPARE_MAX_FILES) : parsed.files,
      cut: parsed.cut || over,
      truncated: parsed.truncated || over,
    };
    this.parsed.set(key, out);
    return out;
  }
}

/** A reader's "not found" as the API's 404 (the ends were resolved: only a vanished commit). */
async function read<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ReadNotFound) throw ApiError.notFound('revision');
    throw e;
  }
}

/** A file as the API lists it (`diff`: its hunks, '' for a binary file or one over the cap). */
export function fileJson(f: DiffFile) {
  return {
    path: f.path,
    ...(f.previousPath === undefined ? {} : { previous_path: f.previousPath }),
    status: f.status,
    additions: f.added,
    deletions: f.removed,
    diff: f.lines.length === 0 ? '' : `${f.lines.join('\n')}\n`,
    truncated: f.tooLarge,
  };
}

/**
 * `BASE...HEAD` from the raw request path (before percent-decoding, so an encoded dot, `%2E`,
 * never splits): the text after `/compare/`, split at its one `...`, each side decoded. 400 for
 * anything else.
 */
export function splitRange(url: string): { base: string; head: string } {
  const path = url.split('?', 1)[0] ?? '';
  const at = path.indexOf('/compare/');
  const raw = at < 0 ? '' : path.slice(at + '/compare/'.length);
  const parts = raw.split('...');
  const bad = (why: string) => ApiError.validation(`path.basehead: ${why}; expected BASE...HEAD`);
  if (parts.length !== 2)
    throw bad(parts.length < 2 ? 'no "..."' : 'more than one "..." (encode a dot as %2E)');
  const [base, head] = parts.map((p) => {
    let s: string;
    try {
      s = decodeURIComponent(p);
    } catch {
      throw bad('a bad percent-encoding');
    }
    if (s === '') throw bad('a missing name');
    if (!plausibleRev(s)) throw bad('a name with control characters or over 256 characters');
    return s;
  }) as [string, string];
  return { base, head };
}
