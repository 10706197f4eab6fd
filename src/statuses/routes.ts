import { reply, respond, type Api } from '../http/api.ts';
import type { Access } from '../http/auth.ts';
import type { Actor } from '../domain/access.ts';
import { ApiError } from '../http/errors.ts';
import { pathText } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import { createStatusBody, listStatusesQuery, statusSchema } from './schemas.ts';
import type { StatusesService } from './service.ts';

const COMMIT = { commit: pathText.meta({ description: 'a commit id (full or short) or a ref name' }) };

/** The poster: a token with `repo:write` or, for CI systems, `ci:write` (the 403 names both). */
function poster(access: Access): Actor {
  try {
    return access.actor('repo:write');
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 403) throw e;
  }
  try {
    return access.actor('ci:write');
  } catch (e) {
    if (e instanceof ApiError && e.status === 403)
      throw ApiError.forbidden('token lacks the repo:write or ci:write scope');
    throw e;
  }
}

export function statusRoutes(api: Api, statuses: StatusesService): void {
  api.repoRoute({
    method: 'post',
    path: '/statuses/:commit',
    repo: { role: 'member', authenticated: true },
    params: COMMIT,
    tag: 'statuses',
    auth: 'token',
    summary:
      'Report a status on a commit (repo:write or ci:write, org member): `{state, context, description?, target_url?}`; the latest status of each context counts',
    operationId: 'createCommitStatus',
    body: createStatusBody,
    returns: respond.created(statusSchema, 'the new status', (s, params) =>
      apiPath('repos', params.org!, params.repo!, 'commits', s.commit, 'statuses'),
    ),
    errors: {
      400: 'invalid body: unknown `state`, empty or too long `context` (255), `description` over 1000 characters, `target_url` not an http(s) URL',
      403: 'the token lacks repo:write and ci:write or does not reach the repository, or the caller is not an org member',
      404: 'no such repository, or no such commit',
    },
    earlier: {
      summary:
        'Report a status on a commit (write, org member): `{state, context, description?, target_url?}`',
    },
    handler: async ({ access, target, params, body }) =>
      reply.created(await statuses.create(target, poster(access), params.commit, body)),
  });
  api.repoRoute({
    method: 'get',
    path: '/commits/:commit/statuses',
    repo: { scope: 'repo:read' },
    params: COMMIT,
    tag: 'statuses',
    auth: 'public',
    summary:
      "A commit's statuses, paged: the latest status of each context first (`latest: true`), then the earlier ones, newest first",
    operationId: 'listCommitStatuses',
    query: listStatusesQuery,
    returns: respond.list(statusSchema, 'statuses'),
    errors: {
      403: 'a private repository and the token lacks repo:read or does not reach it',
      404: 'no such repository, or no such commit',
    },
    handler: async ({ target, params, query }) =>
      reply.list(await statuses.list(target, params.commit, query)),
  });
}
