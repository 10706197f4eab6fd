import { reply, respond, type Api } from '../http/api.ts';
import { apiPath } from '../http/responses.ts';
import { pageQuery } from '../http/pagination.ts';
import { pathText } from '../http/params.ts';
import { ApiError } from '../http/errors.ts';
import type { UsersService } from '../users/service.ts';
import { userRefJson } from '../users/schemas.ts';
import type { OrgsService } from './service.ts';
import { createOrgBody, memberBody, memberSchema, orgJson, orgSchema, userOrgSchema } from './schemas.ts';

const OWNER_ONLY = 'not an owner of the organization, or the token lacks the admin scope or reach';
const OWNER = { role: 'owner', scope: 'admin' } as const;

export function orgRoutes(api: Api, orgs: OrgsService, users: UsersService): void {
  api.route({
    method: 'post',
    path: '/api/v1/orgs',
    tag: 'orgs',
    auth: 'token',
    operationId: 'createOrg',
    summary:
      'Create an organization; the caller becomes its owner (personal token with repo:write; per-user cap)',
    body: createOrgBody,
    returns: respond.created(orgSchema, 'the new organization', (o) => apiPath('orgs', o.name)),
    errors: {
      403: 'the token is not a personal token with `repo:write`',
      409: 'the name is taken (case-insensitive), or the per-user cap is reached (`limit_exceeded`)',
    },
    links: Object.fromEntries(
      ['getOrg', 'listRepos', 'createRepo', 'listMembers'].map((id) => [
        id,
        { org: '$response.body#/data/name' },
      ]),
    ),
    handler: async ({ access, body }) => {
      const user = access.personal('repo:write');
      return reply.created(orgJson(await orgs.create(user.id, body, { capped: !user.isAdmin })));
    },
  });
  api.route({
    method: 'get',
    path: '/api/v1/orgs',
    tag: 'orgs',
    auth: 'public',
    operationId: 'listOrgs',
    summary: 'Every organization (public fields), by name',
    query: pageQuery(),
    returns: respond.list(orgSchema, 'organizations, by name (case-insensitive)'),
    handler: async ({ query }) => reply.list(await orgs.list(query)),
  });
  api.route({
    method: 'get',
    path: '/api/v1/user/orgs',
    tag: 'users',
    auth: 'token',
    operationId: 'listMyOrgs',
    summary:
      "The caller's organizations with the caller's role (any valid token; an org or repo token: its organization)",
    query: pageQuery(),
    returns: respond.list(userOrgSchema, "the caller's organizations, by name (case-insensitive)"),
    handler: async ({ access, query }) => {
      const reach = access.listReach();
      return reply.list(await orgs.forUser(access.user().id, reach.orgId, query));
    },
  });
  api.route({
    method: 'get',
    path: '/api/v1/orgs/:org',
    params: { org: pathText },
    tag: 'orgs',
    auth: 'public',
    operationId: 'getOrg',
    summary: 'An organization',
    returns: respond.data(orgSchema, 'the organization'),
    handler: async ({ params }) => reply.ok(orgJson(await orgs.get(params.org))),
  });
  api.orgRoute({
    org: { role: 'member', earlier: 'read' },
    method: 'get',
    path: '/members',
    tag: 'orgs',
    auth: 'token',
    operationId: 'listMembers',
    summary: 'Members of an organization with their roles (org members only)',
    query: pageQuery(),
    returns: respond.list(memberSchema, 'members, by username'),
    errors: {
      403: 'not a member of the organization, the token is restricted to another target, or (earlier variant) it lacks the read scope',
    },
    handler: async ({ org, query }) => reply.list(await orgs.members(org.id, query)),
  });
  api.orgRoute({
    org: OWNER,
    method: 'put',
    path: '/members/:username',
    params: { username: pathText },
    tag: 'orgs',
    auth: 'token',
    operationId: 'setMember',
    summary: 'Add a member or change a role (org owner, admin scope)',
    body: memberBody,
    returns: respond.data(memberSchema, 'the member with the new role (the member list shape)'),
    errors: { 403: OWNER_ONLY, 404: 'no such organization or user', 409: 'the last owner cannot be demoted' },
    handler: async ({ org, params, body }) => {
      const user = await users.byUsername(params.username);
      const r = await orgs.setMember(org.id, user.id, body.role);
      // The same member shape as the member list.
      return reply.ok({ user: { ...userRefJson(user), email: user.email }, role: r.role });
    },
  });
  api.orgRoute({
    org: OWNER,
    method: 'delete',
    path: '/members/:username',
    params: { username: pathText },
    tag: 'orgs',
    auth: 'token',
    operationId: 'removeMember',
    summary: 'Remove a member (org owner, admin scope); the last owner cannot be removed',
    returns: respond.empty('the member is removed'),
    errors: {
      403: OWNER_ONLY,
      404: 'no such organization or member',
      409: 'the last owner cannot be removed',
    },
    handler: async ({ org, params }) => {
      const user = await users.byUsername(params.username).catch((e: unknown) => {
        throw e instanceof ApiError ? ApiError.notFound('member') : e;
      });
      await orgs.removeMember(org.id, user.id);
      return reply.noContent();
    },
  });
}
