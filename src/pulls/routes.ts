import type { ContentsService } from '../repos/contents-service.ts';
import { earlierCommitShape } from '../repos/earlier.ts';
import { reply, respond, type Api } from '../http/api.ts';
import type { Access } from '../http/auth.ts';
import type { RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import { pathInt } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import { offsetOf, pageQuery } from '../http/pagination.ts';
import { COMPARE_MAX_FILES, fileJson } from '../repos/compare.ts';
import { commitSchema, compareFileSchema } from '../repos/schemas.ts';
import {
  createPullBody,
  listPullsQuery,
  mergePullBody,
  pullCommentBody,
  pullCommentSchema,
  pullSchema,
  updatePullBody,
} from './schemas.ts';
import type { PullsService } from './service.ts';
import type { MergeRights } from './merge.ts';
import { earlierCreatePullBody, earlierPullShape } from './earlier.ts';

const READ_403 = 'a private repository and the token lacks pulls:read or does not reach it';
const WRITE_403 = 'the token lacks pulls:write or does not reach the repository';
const MEMBER_403 = `${WRITE_403}, or the caller is not a member of the organization`;
const NUMBER = { number: pathInt };

/** What the caller may do besides merging: push (`canPush`), and their role for protected refs. */
export async function mergeRights(access: Access, target: RepoTarget): Promise<MergeRights> {
  return { push: await canPush(access, target), role: await access.roleIn(target.org.id) };
}

/** Could this caller push to the repository (`repo:write`, org member, a token reaching it)? */
export async function canPush(access: Access, target: RepoTarget): Promise<boolean> {
  return access.authorize(target, { scope: 'repo:write', role: 'member' }).then(
    () => true,
    (e: unknown) => {
      if (e instanceof ApiError && e.status < 500) return false;
      throw e;
    },
  );
}

export function pullRoutes(api: Api, pulls: PullsService, contents: Pick<ContentsService, 'numbered'>): void {
  const base = '/pulls';
  const { reads, writes, merges } = pulls;

  api.repoRoute({
    method: 'get',
    path: base,
    repo: { scope: 'pulls:read' },
    tag: 'pulls',
    auth: 'public',
    summary: 'Pull requests by status (default open), newest first, with mergeability computed on read',
    operationId: 'listPulls',
    query: listPullsQuery,
    returns: respond.list(pullSchema, 'pull requests (without comments)'),
    earlier: { returns: earlierPullShape },
    errors: { 403: READ_403 },
    handler: async ({ target, query }) => reply.list(await reads.list(target, query)),
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/:number`,
    repo: { scope: 'pulls:read' },
    params: NUMBER,
    tag: 'pulls',
    auth: 'public',
    summary: 'A pull request with all its comments and its mergeability now',
    operationId: 'getPull',
    returns: respond.data(pullSchema, 'the pull request'),
    earlier: { returns: earlierPullShape },
    errors: { 403: READ_403, 404: 'no such repository or pull request' },
    handler: async ({ target, params }) => reply.ok(await reads.detail(target, params.number)),
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/:number/commits`,
    repo: { scope: 'pulls:read' },
    params: NUMBER,
    tag: 'pulls',
    auth: 'public',
    summary:
      "A pull request's commits (those of its source that its target lacks), oldest first, paged; a closed or merged one's as recorded",
    operationId: 'listPullCommits',
    query: pageQuery(),
    returns: respond.list(commitSchema, 'commits, oldest first'),
    earlier: { returns: earlierCommitShape },
    errors: { 403: READ_403, 404: 'no such repository or pull request' },
    handler: async ({ target, params, query, variant }) => {
      const page = await reads.commits(target, params.number, query);
      return reply.list(
        variant === 'earlier' ? { ...page, items: await contents.numbered(target, page.items) } : page,
      );
    },
  });
  api.repoRoute({
    method: 'get',
    path: `${base}/:number/files`,
    repo: { scope: 'pulls:read' },
    params: NUMBER,
    tag: 'pulls',
    auth: 'public',
    summary:
      "A pull request's changed files (the diff from the merge base to its head, as a compare's `files`), in path order, paged; at most 3,000",
    operationId: 'listPullFiles',
    query: pageQuery(),
    returns: respond.list(compareFileSchema, 'files, in path order'),
    errors: { 403: READ_403, 404: 'no such repository or pull request' },
    handler: async ({ target, params, query }) => {
      const { files } = await reads.files(target, params.number);
      const at = offsetOf(query);
      const items = files.slice(at, at + query.per_page).map(fileJson);
      const total = Math.min(files.length, COMPARE_MAX_FILES);
      return reply.list({ items, total, page: query.page, perPage: query.per_page });
    },
  });
  api.repoRoute({
    method: 'post',
    path: base,
    repo: { scope: 'pulls:write', role: 'member' },
    tag: 'pulls',
    auth: 'token',
    summary:
      'Open a pull request (pulls:write, org member); target default: `@` (Mercurial), the default branch (Git, Fossil)',
    operationId: 'createPull',
    body: createPullBody,
    returns: respond.created(pullSchema, 'the new pull request', (p, params) =>
      apiPath('repos', params.org!, params.repo!, 'pulls', p.number),
    ),
    errors: {
      400: 'invalid body, `ref_type` given, or source and target are the same ref',
      403: MEMBER_403,
      404: 'no such repository, or the source or target ref does not exist (the message names it)',
      409: 'an open pull request with the same source and target exists',
    },
    links: Object.fromEntries(
      ['getPull', 'updatePull', 'mergePull', 'createPullComment'].map((id) => [
        id,
        { org: '$request.path.org', repo: '$request.path.repo', number: '$response.body#/data/number' },
      ]),
    ),
    earlier: {
      summary:
        "Open a pull request (write, org member): `{title, body, source_bookmark, target_branch?}`; target default: the repository's default branch (`default` in Mercurial)",
      body: earlierCreatePullBody,
      returns: earlierPullShape,
    },
    handler: async ({ access, target, body, variant }) =>
      reply.created(
        await writes.create(target, access.actor(), body, {
          defaultTarget: variant === 'earlier' ? 'branch' : 'mainline',
        }),
      ),
  });
  api.repoRoute({
    method: 'patch',
    path: `${base}/:number`,
    repo: { scope: 'pulls:write' },
    params: NUMBER,
    tag: 'pulls',
    auth: 'token',
    summary:
      'Change title, body or state (`open`, `closed`) of a pull request (pulls:write; author or org owner)',
    operationId: 'updatePull',
    body: updatePullBody,
    returns: respond.data(pullSchema, 'the updated pull request'),
    earlier: { returns: earlierPullShape },
    errors: {
      403: `${WRITE_403}, or the caller is neither the author nor an org owner`,
      404: 'no such repository or pull request',
      409: 'a state change of a merged pull request (`not_open`), or reopening while another open pull request has the same refs',
    },
    handler: async ({ access, target, params, body }) =>
      reply.ok(await writes.update(target, await access.actorIn(target.org.id), params.number, body)),
  });
  api.repoRoute({
    method: 'post',
    path: `${base}/:number/merge`,
    repo: { scope: 'pulls:write', role: 'member' },
    params: NUMBER,
    tag: 'pulls',
    auth: 'token',
    summary:
      'Merge a pull request (pulls:write, org member): style merge (default; fast-forward when possible), ff-only or squash; `delete_source` also needs repo:write and never deletes the default branch',
    operationId: 'mergePull',
    body: mergePullBody,
    optionalBody: true,
    returns: respond.data(pullSchema, 'the merged pull request (`merge_commit` is the target head)'),
    earlier: {
      summary:
        'Merge a pull request into its target branch (write, org member); the same body as the current variant',
      returns: earlierPullShape,
    },
    errors: {
      403: `${MEMBER_403}; or \`delete_source\` and the token lacks repo:write (nothing is merged); or a protection rule of the target does not let the caller push to it (nothing is merged)`,
      404: 'no such repository or pull request, or its source or target ref no longer exists',
      409: '`merge_conflict` (with `conflicted_files`; nothing changed), `head_moved`, `target_moved`, `not_fast_forward`, `not_open`, nothing to merge (`conflict`), or the checks a protection rule of the target requires have not passed on the head (`checks_pending`) or failed (`checks_failed`)',
      503: 'the repository is busy: its push lock was not free within 60 s (`service_unavailable`)',
    },
    handler: async ({ access, target, params, body }) =>
      reply.ok(
        await merges.merge(target, access.actor(), await mergeRights(access, target), params.number, body),
      ),
  });
  api.repoRoute({
    method: 'post',
    path: `${base}/:number/comments`,
    repo: { scope: 'pulls:write' },
    params: NUMBER,
    tag: 'pulls',
    auth: 'token',
    summary: 'Comment on a pull request (pulls:write)',
    operationId: 'createPullComment',
    body: pullCommentBody,
    returns: respond.created(pullCommentSchema, 'the new comment'),
    errors: { 403: WRITE_403, 404: 'no such repository or pull request' },
    handler: async ({ access, target, params, body }) =>
      reply.created(await writes.comment(target, access.actor(), params.number, body.body)),
  });
}
