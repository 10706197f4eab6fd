import { z } from 'zod';
import { reply, respond, type Api } from '../http/api.ts';
import type { Access } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { pageQuery, type Page } from '../http/pagination.ts';
import type { VcsKind } from '../vcs/index.ts';
import {
  BadPath,
  DEFAULT_LIMITS,
  normalisePath,
  plausibleRev,
  ReadNotFound,
  type LogEntry,
  type ContentLimits,
  type RepoReader,
} from '../vcs/reader.ts';
import { type ReaderPool } from '../vcs/pool.ts';
import type { ReposService } from './service.ts';
import { changesetSchema, commitSchema, fileContentSchema, treeEntrySchema } from './schemas.ts';

const revText = z
  .string()
  .min(1)
  .max(256)
  // eslint-disable-next-line no-control-regex
  .regex(/^[^\u0000-\u001f\u007f]*$/, 'must not contain control characters');
const revQuery = z.object({ rev: revText.default('tip') });
const logQuery = pageQuery().extend({ rev: revText.default('tip') });
/** Documents the path parameters (the service judges them): a revision, a relative path. */
const revParam = revText.meta({
  description: 'a revision: hash, branch, bookmark, tag or `tip`; may contain `/`',
});
const pathParam = z.string().meta({
  description: 'a path relative to the repository root; no `..` segments, backslashes or control characters',
  pattern: '^(?!/)(?!(.*/)?\\.\\.(/|$))[^\\u0000-\\u001f\\u007f\\\\]*$',
});

/**
 * Repository contents (tree, blob, log, changeset) read through the pooled VCS readers.
 * Decisions where the spec is silent: a missing path, a tree of a file and a blob of a directory
 * answer 404 `not_found`; a path escaping the repository answers 400 `validation_failed`; the
 * default revision `tip` of a repository without commits answers 404 "repository is empty".
 */
export class ContentsService {
  private readonly repos: ReposService;
  private readonly pool: ReaderPool;
  /** Repository id -> storage path and kind (neither ever changes for an id). */
  private readonly where = new Map<number, { vcs: VcsKind; path: string }>();

  private readonly limits: ContentLimits;

  constructor(repos: ReposService, pool: ReaderPool, limits: ContentLimits = DEFAULT_LIMITS) {
    this.repos = repos;
    this.pool = pool;
    this.limits = limits;
  }

  private async reader(access: Access, org: string, name: string): Promise<RepoReader> {
    const { repo } = await access.repo(org, name, { scope: 'repo:read' });
    let w = this.where.get(repo.id);
    if (w === undefined) {
      const full = await this.repos.get(repo.id);
      w = { vcs: full.vcs as VcsKind, path: this.repos.path(full) };
      if (this.where.size > 10_000) this.where.clear();
      this.where.set(repo.id, w);
    }
    return this.pool.get(w.vcs, w.path);
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

  async tree(access: Access, org: string, repo: string, rawPath: unknown, rev: string) {
    const p = ContentsService.path(rawPath);
    const r = ContentsService.rev(rev);
    const reader = await this.reader(access, org, repo);
    return this.read(() => reader.tree(r, p));
  }

  async blob(access: Access, org: string, repo: string, rawPath: unknown, rev: string) {
    const p = ContentsService.path(rawPath);
    const r = ContentsService.rev(rev);
    if (p === '') throw ApiError.notFound('file');
    const reader = await this.reader(access, org, repo);
    return this.read(() => reader.blob(r, p, this.limits.blobMaxBytes));
  }

  async log(access: Access, org: string, repo: string, q: z.infer<typeof logQuery>): Promise<Page<LogEntry>> {
    const r = ContentsService.rev(q.rev);
    const reader = await this.reader(access, org, repo);
    const out = await this.read(() => reader.log(r, q.page, q.per_page));
    return { items: out.entries, total: out.total, page: q.page, perPage: q.per_page };
  }

  async changeset(access: Access, org: string, repo: string, rev: string) {
    const r = ContentsService.rev(rev);
    const reader = await this.reader(access, org, repo);
    return this.read(() => reader.changeset(r, this.limits));
  }
}

const READ_ERRORS = {
  400: 'a path with `..`, a leading `/`, a backslash or control characters, or a bad `rev` (`validation_failed`)',
  403: 'a private repository and the token lacks repo:read or does not reach it',
  404: 'no such repository, revision or path, or the repository is empty',
} as const;

/** Routes under /api/v1/repos/:org/:repo for contents (thin: parse -> service -> reply). */
export function contentRoutes(
  api: Api,
  repos: ReposService,
  pool: ReaderPool,
  limits: ContentLimits = DEFAULT_LIMITS,
): ContentsService {
  const svc = new ContentsService(repos, pool, limits);
  const p = (params: Record<string, string>, k: string): string => params[k] ?? '';
  for (const [operationId, path] of [
    ['getRootTree', '/api/v1/repos/:org/:repo/tree'],
    ['getTree', '/api/v1/repos/:org/:repo/tree/*path'],
  ] as const) {
    api.route({
      method: 'get',
      path,
      tag: 'contents',
      auth: 'public',
      operationId,
      summary: 'Directory listing at a revision (`rev`, default tip): dirs first, then files',
      query: revQuery,
      params: { path: pathParam },
      returns: respond.data(z.array(treeEntrySchema), 'the entries of the directory'),
      errors: READ_ERRORS,
      handler: async ({ access, params, query }) =>
        reply.ok(await svc.tree(access, p(params, 'org'), p(params, 'repo'), params.path, query.rev)),
    });
  }
  api.route({
    method: 'get',
    path: '/api/v1/repos/:org/:repo/blob/*path',
    tag: 'contents',
    auth: 'public',
    operationId: 'getBlob',
    summary:
      'File content at a revision; binary files have `encoding: "base64"`; content beyond the blob cap is cut (`truncated: true`, `size` is the full size)',
    query: revQuery,
    params: { path: pathParam },
    returns: respond.data(fileContentSchema, 'the file'),
    errors: READ_ERRORS,
    handler: async ({ access, params, query }) =>
      reply.ok(await svc.blob(access, p(params, 'org'), p(params, 'repo'), params.path, query.rev)),
  });
  api.route({
    method: 'get',
    path: '/api/v1/repos/:org/:repo/log',
    tag: 'contents',
    auth: 'public',
    operationId: 'listCommits',
    summary: 'Commit log from `rev` (default tip), newest first, paged',
    query: logQuery,
    returns: respond.list(commitSchema, 'commits, newest first'),
    errors: READ_ERRORS,
    handler: async ({ access, params, query }) =>
      reply.list(await svc.log(access, p(params, 'org'), p(params, 'repo'), query)),
  });
  api.route({
    method: 'get',
    path: '/api/v1/repos/:org/:repo/changeset/*rev',
    tag: 'contents',
    auth: 'public',
    operationId: 'getChangeset',
    summary:
      'One changeset with its diff (git-style unified diff against the first parent), capped per file and in total (`diff_truncated`, `diff_truncated_files`); `rev` may contain `/` (a branch `feature/x`)',
    params: { rev: revParam },
    returns: respond.data(changesetSchema, 'the changeset'),
    errors: READ_ERRORS,
    handler: async ({ access, params }) => {
      // As for every other path segment, a NUL names nothing (404).
      if (p(params, 'rev').includes('\u0000')) throw ApiError.notFound('revision');
      return reply.ok(await svc.changeset(access, p(params, 'org'), p(params, 'repo'), p(params, 'rev')));
    },
  });
  return svc;
}
