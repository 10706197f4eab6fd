import type { ReadAhead } from '../vcs/reader.ts';
import { z } from 'zod';
import { reply, respond, type Api, type Ctx, type Reply } from '../http/api.ts';
import { handOffSocket } from '../http/stream-reply.ts';
import { strongEtag, unchanged } from '../http/conditional.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import { pageQuery } from '../http/pagination.ts';
import type { ContentsService } from './contents-service.ts';
import { fileJson, splitRange, type CompareService } from './compare.ts';
import {
  changesetSchema,
  commitSchema,
  compareSchema,
  fileContentSchema,
  treeEntrySchema,
} from './schemas.ts';
import { earlierChangesetShape, earlierCommitShape, earlierCompareShape } from './earlier.ts';
import type { ApiVariant } from '../domain/variant.ts';

/** The ETag kind of a read whose answer differs between the variants (the earlier one names `rev`). */
const shaped = (kind: string, variant: ApiVariant) => (variant === 'earlier' ? `${kind}.earlier` : kind);

const revText = z
  .string()
  .min(1)
  .max(256)
  // eslint-disable-next-line no-control-regex
  .regex(/^[^\u0000-\u001f\u007f]*$/, 'must not contain control characters');
const revQuery = z.object({ rev: revText.default('tip') });
const logQuery = pageQuery().extend({ rev: revText.default('tip') });
/** Documents the path parameters (the service judges them): a revision, a relative path. */
const revParam = z.string().meta({
  description: 'a revision: hash, branch, bookmark, tag or `tip`; may contain `/`',
  minLength: 1,
  maxLength: 256,
  pattern: '^[^\\u0000-\\u001f\\u007f]*$',
});
const pathParam = z.string().meta({
  description: 'a path relative to the repository root; no `..` segments, backslashes or control characters',
  pattern: '^(?!/)(?!(.*/)?\\.\\.(/|$))[^\\u0000-\\u001f\\u007f\\\\]*$',
});

const READ_ERRORS = {
  400: 'a path with `..`, a leading `/`, a backslash or control characters, or a bad `rev` (`validation_failed`)',
  403: 'a private repository and the token lacks repo:read or does not reach it',
  404: 'no such repository, revision or path, or the repository is empty',
} as const;

const AT_COMMIT = 'the commit `rev` resolves to (a moving `rev` such as a branch answers 304 until it moves)';

/** Routes under /api/v1/repos/:org/:repo for contents (thin: parse -> service -> reply). */
export function contentRoutes(
  api: Api,
  svc: ContentsService,
  compare: CompareService,
  opts: { socketHandOff: boolean },
): void {
  const READ = { scope: 'repo:read' } as const;
  /**
   * A read at the commit `rev` resolves to, with that commit's `ETag`; 304 when the client's
   * copy is current. A `rev` that resolves to nothing is read as given: the read answers the 404.
   */
  const atCommit = async <T>(
    ctx: Pick<Ctx<unknown, unknown>, 'req' | 'res' | 'variant'> & { target: RepoTarget },
    kind: string,
    rev: string,
    read: (at: string) => Promise<T>,
    ahead?: ReadAhead,
  ): Promise<Reply<T>> => {
    const at = await svc.commit(ctx.target, rev, ahead);
    if (at !== undefined && unchanged(ctx.req, ctx.res, strongEtag(kind, at))) return reply.notModified();
    return reply.ok(await read(at ?? rev));
  };
  const tree = {
    repo: READ,
    method: 'get',
    tag: 'contents',
    auth: 'public',
    summary: 'Directory listing at a revision (`rev`, default tip): dirs first, then files',
    query: revQuery,
    returns: respond.data(z.array(treeEntrySchema), 'the entries of the directory', { etag: AT_COMMIT }),
    errors: READ_ERRORS,
  } as const;
  api.repoRoute({
    ...tree,
    path: '/tree',
    operationId: 'getRootTree',
    handler: (ctx) =>
      atCommit(
        ctx,
        'tree',
        ctx.query.rev,
        async (at) => svc.tree(ctx.target, undefined, at),
        svc.ahead.tree(undefined),
      ),
  });
  api.repoRoute({
    ...tree,
    path: '/tree/*path',
    operationId: 'getTree',
    params: { path: pathParam },
    handler: (ctx) =>
      atCommit(
        ctx,
        'tree',
        ctx.query.rev,
        async (at) => svc.tree(ctx.target, ctx.params.path, at),
        svc.ahead.tree(ctx.params.path),
      ),
  });
  api.repoRoute({
    repo: READ,
    method: 'get',
    path: '/blob/*path',
    tag: 'contents',
    auth: 'public',
    operationId: 'getBlob',
    summary:
      'File content at a revision; binary files have `encoding: "base64"`; content beyond the blob cap is cut (`truncated: true`, `size` is the full size)',
    query: revQuery,
    params: { path: pathParam },
    returns: respond.data(fileContentSchema, 'the file', { etag: AT_COMMIT }),
    errors: READ_ERRORS,
    handler: (ctx) =>
      atCommit(
        ctx,
        'blob',
        ctx.query.rev,
        async (at) => svc.blob(ctx.target, ctx.params.path, at),
        svc.ahead.blob(ctx.params.path),
      ),
  });
  api.repoRoute({
    repo: READ,
    method: 'get',
    path: '/raw/*path',
    tag: 'contents',
    auth: 'public',
    operationId: 'getRawFile',
    summary:
      "A file's bytes at a revision (`rev`, default tip), whole and uncut, streamed: `text/plain; charset=utf-8` when its first 8000 bytes are UTF-8 text without NUL, else `application/octet-stream`",
    query: revQuery,
    params: { path: pathParam },
    returns: respond.text(
      ['application/octet-stream', 'text/plain; charset=utf-8'],
      'the file, byte for byte',
      {
        'Content-Length': { description: 'the size of the file in bytes', required: true, type: 'integer' },
      },
      { etag: "the file's id in the repository (a moving `rev` answers 304 while the file stays the same)" },
    ),
    errors: READ_ERRORS,
    handler: async ({ req, res, target, params, query }) => {
      const socket = opts.socketHandOff ? handOffSocket(req) : undefined;
      const fresh = (version: string) => unchanged(req, res, strongEtag('raw', version));
      const file = await svc.raw(target, params.path, query.rev, { socket, unchanged: fresh });
      if (file === undefined) return reply.notModified();
      return reply.stream(
        {
          'Content-Type': file.contentType,
          'Content-Length': String(file.size),
          // never run as a page of this origin, whatever the file holds
          'X-Content-Type-Options': 'nosniff',
          'Content-Security-Policy': "default-src 'none'; sandbox",
          // a producer that makes the connection blocking (Fossil): closed after this response
          ...(file.closes ? { Connection: 'close' } : {}),
        },
        file.body,
        file.handOff,
      );
    },
  });
  api.repoRoute({
    repo: READ,
    method: 'get',
    path: '/log',
    tag: 'contents',
    auth: 'public',
    operationId: 'listCommits',
    summary: 'Commit log from `rev` (default tip), newest first, paged; an empty repository has an empty log',
    query: logQuery,
    returns: respond.list(commitSchema, 'commits, newest first', { etag: AT_COMMIT }),
    earlier: { returns: earlierCommitShape },
    errors: { ...READ_ERRORS, 404: 'no such repository or revision' },
    handler: async (ctx) => {
      const kind = shaped('log', ctx.variant);
      const at = await svc.commit(ctx.target, ctx.query.rev, svc.ahead.log(ctx.query));
      if (at !== undefined && unchanged(ctx.req, ctx.res, strongEtag(kind, at))) return reply.notModified();
      const page = await svc.log(
        ctx.target,
        { ...ctx.query, rev: at ?? ctx.query.rev },
        { revs: ctx.variant === 'earlier' },
      );
      // an empty repository's (empty) log: current until its first commit
      if (at === undefined && unchanged(ctx.req, ctx.res, strongEtag(kind, ''))) return reply.notModified();
      return reply.list(page);
    },
  });
  api.repoRoute({
    repo: READ,
    method: 'get',
    path: '/changeset/*rev',
    tag: 'contents',
    auth: 'public',
    operationId: 'getChangeset',
    summary:
      'One changeset with its diff (git-style unified diff against the first parent), capped per file and in total (`diff_truncated`, `diff_truncated_files`); `rev` may contain `/` (a branch `feature/x`)',
    params: { rev: revParam },
    returns: respond.data(changesetSchema, 'the changeset', { etag: AT_COMMIT }),
    earlier: { returns: earlierChangesetShape },
    errors: READ_ERRORS,
    handler: async (ctx) => {
      // As for every other path segment, a NUL names nothing (404).
      if (ctx.params.rev.includes('\u0000')) throw ApiError.notFound('revision');
      return atCommit(
        ctx,
        shaped('changeset', ctx.variant),
        ctx.params.rev,
        (at) => svc.changeset(ctx.target, at, { revs: ctx.variant === 'earlier' }),
        svc.ahead.changeset(),
      );
    },
  });
  api.repoRoute({
    repo: READ,
    method: 'get',
    path: '/compare/*basehead',
    tag: 'contents',
    auth: 'public',
    operationId: 'compareCommits',
    summary:
      'A three-dot compare `BASE...HEAD`: the commits reachable from head and not from base (oldest first, the first 250) and the diff from their merge base to head, file by file, under the diff caps',
    params: {
      basehead: z.string().meta({
        description:
          'two names joined by `...`: each a branch, bookmark, tag or commit id (full or an unambiguous prefix); a name holding `/` may keep it or encode it (`%2F`), a name holding `...` encodes a dot (`%2E`)',
        minLength: 1,
      }),
    },
    returns: respond.data(compareSchema, 'the compare'),
    earlier: { returns: earlierCompareShape },
    errors: {
      400: 'not `BASE...HEAD` (a missing name, no `...`, several `...`, a bad encoding or control characters: `validation_failed`)',
      403: READ_ERRORS[403],
      404: 'no such repository, or base or head names nothing (the message names it)',
    },
    handler: async ({ req, target, variant }) => {
      const { base, head } = splitRange(req.originalUrl);
      const r = await compare.compare(target, base, head);
      return reply.ok({
        base: r.base,
        head: r.head,
        merge_base: r.mergeBase ?? null,
        total_commits: r.totalCommits,
        commits: variant === 'earlier' ? await svc.numbered(target, r.commits) : r.commits,
        files: r.files.map(fileJson),
        diff_truncated: r.truncated,
      });
    },
  });
}
