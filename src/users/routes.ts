import { z } from 'zod';
import { reply, type Api } from '../http/api.ts';
import type { Access, AuthUser } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { pageQuery } from '../http/pagination.ts';
import { createTokenBody, createUserBody, userJson, type UsersService } from './service.ts';

/** Token management with any valid token — except a CI clone credential. */
function tokenOwner(access: Access): AuthUser {
  const user = access.user();
  if (access.principal.kind === 'user' && access.principal.grant.pipeline === true) {
    throw ApiError.forbidden('a CI clone credential cannot manage tokens');
  }
  return user;
}

const idParam = (raw: string | undefined): number => {
  const n = Number(raw);
  return Number.isSafeInteger(n) && n > 0 ? n : -1;
};

export function userRoutes(api: Api, users: UsersService): void {
  api.route({
    method: 'get',
    path: '/api/v1/user',
    tag: 'users',
    auth: 'token',
    summary: 'The authenticated user',
    handler: async ({ access }) => reply.ok(userJson(await users.get(access.user().id))),
  });
  api.route({
    method: 'get',
    path: '/api/v1/user/tokens',
    tag: 'users',
    auth: 'token',
    summary: "The caller's tokens, without token values (paged list, oldest first)",
    query: pageQuery(),
    handler: async ({ access, query }) => reply.list(await users.listTokens(tokenOwner(access).id, query)),
  });
  api.route({
    method: 'post',
    path: '/api/v1/user/tokens',
    tag: 'users',
    auth: 'token',
    summary: 'Create a token; the plaintext `token` is returned only here',
    body: createTokenBody,
    status: 201,
    handler: async ({ access, body }) => {
      const user = tokenOwner(access);
      const p = access.principal;
      return reply.created(await users.createToken(user.id, body, p.kind === 'user' ? p.grant : undefined));
    },
  });
  api.route({
    method: 'delete',
    path: '/api/v1/user/tokens/:id',
    tag: 'users',
    auth: 'token',
    summary: 'Permanently delete one of the caller’s tokens',
    status: 204,
    handler: async ({ access, params }) => {
      await users.deleteToken(tokenOwner(access).id, idParam(params.id));
      return reply.noContent();
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/admin/users',
    tag: 'admin',
    auth: 'admin',
    summary: 'Create a user (site admin)',
    body: createUserBody,
    status: 201,
    handler: async ({ access, body }) => {
      access.admin();
      return reply.created(userJson(await users.create(body)));
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/admin/users/:username/tokens',
    tag: 'admin',
    auth: 'admin',
    summary: 'Create a token for a user (site admin); same body and response as POST /api/v1/user/tokens',
    body: createTokenBody,
    status: 201,
    handler: async ({ access, body, params }) => {
      access.admin();
      const user = await users.byUsername(z.string().parse(params.username));
      // A site admin may grant any scope to anyone, but not beyond the expiry of its own token.
      const p = access.principal;
      const minter = p.kind === 'user' ? p.grant : undefined;
      return reply.created(await users.createToken(user.id, body, minter, { checkReach: false }));
    },
  });
}
