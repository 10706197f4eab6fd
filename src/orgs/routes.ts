import { reply, type Api } from '../http/api.ts';
import { pageQuery } from '../http/pagination.ts';
import { ApiError } from '../http/errors.ts';
import { userRefJson, type UsersService } from '../users/service.ts';
import { createOrgBody, memberBody, orgJson, type OrgsService } from './service.ts';

export function orgRoutes(api: Api, orgs: OrgsService, users: UsersService): void {
  api.route({
    method: 'post',
    path: '/api/v1/orgs',
    tag: 'orgs',
    auth: 'token',
    summary:
      'Create an organization; the caller becomes its owner (personal token with repo:write; per-user cap)',
    body: createOrgBody,
    status: 201,
    handler: async ({ access, body }) => {
      const user = access.personal('repo:write');
      return reply.created(orgJson(await orgs.create(user.id, body, { capped: !user.isAdmin })));
    },
  });
  api.route({
    method: 'get',
    path: '/api/v1/orgs/:org',
    tag: 'orgs',
    auth: 'public',
    summary: 'An organization',
    handler: async ({ params }) => reply.ok(orgJson(await orgs.get(params.org ?? ''))),
  });
  api.route({
    method: 'get',
    path: '/api/v1/orgs/:org/members',
    tag: 'orgs',
    auth: 'token',
    summary: 'Members of an organization with their roles (org members only)',
    query: pageQuery(),
    handler: async ({ access, params, query }) => {
      const org = await access.org(params.org ?? '', { role: 'member' });
      return reply.list(await orgs.members(org.id, query));
    },
  });
  api.route({
    method: 'put',
    path: '/api/v1/orgs/:org/members/:username',
    tag: 'orgs',
    auth: 'token',
    summary: 'Add a member or change a role (org owner, admin scope)',
    body: memberBody,
    handler: async ({ access, params, body }) => {
      const org = await access.org(params.org ?? '', { role: 'owner', scope: 'admin' });
      const user = await users.byUsername(params.username ?? '');
      const r = await orgs.setMember(org.id, user.id, body.role);
      // The same member shape as the member list.
      return reply.ok({ user: { ...userRefJson(user), email: user.email }, role: r.role });
    },
  });
  api.route({
    method: 'delete',
    path: '/api/v1/orgs/:org/members/:username',
    tag: 'orgs',
    auth: 'token',
    summary: 'Remove a member (org owner, admin scope); the last owner cannot be removed',
    status: 204,
    handler: async ({ access, params }) => {
      const org = await access.org(params.org ?? '', { role: 'owner', scope: 'admin' });
      const user = await users.byUsername(params.username ?? '').catch((e: unknown) => {
        throw e instanceof ApiError ? ApiError.notFound('member') : e;
      });
      await orgs.removeMember(org.id, user.id);
      return reply.noContent();
    },
  });
}
