import { reply, respond, type Api } from '../http/api.ts';
import type { RepoNeeds } from '../http/auth.ts';
import { pageQuery, offsetOf } from '../http/pagination.ts';
import { pathInt } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import { createProtectionBody, protectionSchema, updateProtectionBody } from './schemas.ts';
import type { ProtectionsService } from './service.ts';

/**
 * Who reads the rules: org members (they push, and a refusal names the rule), with a token that
 * may read the repository. Who changes them: org owners with the admin scope.
 */
const READ: RepoNeeds = { scope: 'repo:read', role: 'member' };
const MANAGE: RepoNeeds = { scope: 'admin', role: 'owner' };

const BASE = '/protections';
const ONE = `${BASE}/:id`;
const ID = { id: pathInt };
const NOT_FOUND = 'no such repository or rule, or the repository is private and out of reach';
const READ_FORBIDDEN = 'the caller is not a member of the organization';
const FORBIDDEN = 'the token lacks the admin scope or does not reach here, or the caller is not an org owner';
const BAD_BODY = 'invalid body (`validation_failed`): empty or malformed pattern, unknown field, wrong type';
const UNKNOWN_USER = '`push.users` names a user that does not exist (`unprocessable`)';
const DUPLICATE = 'the repository already has a rule with this pattern (`conflict`)';

/** Protected refs of a repository (DESIGN.md section 5): the same routes in both API variants. */
export function protectionRoutes(api: Api, protections: ProtectionsService): void {
  const one = (p: Record<string, string>, id: number) =>
    apiPath('repos', p.org ?? '', p.repo ?? '', 'protections', id);
  api.repoRoute({
    method: 'get',
    path: BASE,
    tag: 'protections',
    auth: 'token',
    operationId: 'listProtections',
    summary: 'Protection rules of the repository, oldest first (paged; org members)',
    repo: READ,
    query: pageQuery(),
    returns: respond.list(protectionSchema, 'the rules'),
    errors: { 403: READ_FORBIDDEN, 404: NOT_FOUND },
    handler: async ({ target, query }) => {
      const all = await protections.list(target);
      const from = offsetOf(query);
      const items = all.slice(from, from + query.per_page);
      return reply.list({ items, total: all.length, page: query.page, perPage: query.per_page });
    },
  });
  api.repoRoute({
    method: 'post',
    path: BASE,
    tag: 'protections',
    auth: 'token',
    operationId: 'createProtection',
    summary:
      'Protect branches or bookmarks matching a pattern: {pattern, fast_forward_only?, allow_deletion?, push?, require_pipeline?, required_contexts?}',
    repo: MANAGE,
    body: createProtectionBody,
    returns: respond.created(protectionSchema, 'the rule', (r, p) => one(p, r.id)),
    errors: { 400: BAD_BODY, 403: FORBIDDEN, 404: NOT_FOUND, 409: DUPLICATE, 422: UNKNOWN_USER },
    handler: async ({ target, body }) => reply.created(await protections.create(target, body)),
  });
  api.repoRoute({
    method: 'get',
    path: ONE,
    tag: 'protections',
    auth: 'token',
    operationId: 'getProtection',
    summary: 'A protection rule (org members)',
    repo: READ,
    params: ID,
    returns: respond.data(protectionSchema, 'the rule'),
    errors: { 403: READ_FORBIDDEN, 404: NOT_FOUND },
    handler: async ({ target, params }) => reply.ok(await protections.get(target, params.id)),
  });
  api.repoRoute({
    method: 'patch',
    path: ONE,
    tag: 'protections',
    auth: 'token',
    operationId: 'updateProtection',
    summary: 'Change a protection rule (the fields given)',
    repo: MANAGE,
    params: ID,
    body: updateProtectionBody,
    returns: respond.data(protectionSchema, 'the changed rule'),
    errors: { 400: BAD_BODY, 403: FORBIDDEN, 404: NOT_FOUND, 409: DUPLICATE, 422: UNKNOWN_USER },
    handler: async ({ target, params, body }) => reply.ok(await protections.update(target, params.id, body)),
  });
  api.repoRoute({
    method: 'delete',
    path: ONE,
    tag: 'protections',
    auth: 'token',
    operationId: 'deleteProtection',
    summary: 'Delete a protection rule',
    repo: MANAGE,
    params: ID,
    returns: respond.empty('deleted'),
    errors: { 403: FORBIDDEN, 404: NOT_FOUND },
    handler: async ({ target, params }) => {
      await protections.remove(target, params.id);
      return reply.noContent();
    },
  });
}
