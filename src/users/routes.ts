import { reply, respond, type Api } from '../http/api.ts';
import { apiPath } from '../http/responses.ts';
import type { Access } from '../http/auth.ts';
import type { AuthUser } from '../domain/access.ts';
import { ApiError } from '../http/errors.ts';
import { pageQuery } from '../http/pagination.ts';
import { pathInt, pathText } from '../http/params.ts';
import type { UsersService } from './service.ts';
import {
  createTokenBody,
  createUserBody,
  earlierCreateTokenBody,
  newTokenSchema,
  profileJson,
  profileSchema,
  tokenSchema,
  updateUserBody,
  userJson,
  userSchema,
} from './schemas.ts';

const CI_CREDENTIAL =
  'a CI clone credential cannot manage tokens; in the earlier variant, a token without the read scope';

/**
 * Token management with any valid token (the earlier variant: a token holding `read`) — except a
 * CI clone credential.
 */
function tokenOwner(access: Access): AuthUser {
  const user = access.user(undefined, 'read');
  if (access.principal.kind === 'user' && access.principal.grant.pipeline === true) {
    throw ApiError.forbidden('a CI clone credential cannot manage tokens');
  }
  return user;
}

const USERNAME = { username: pathText };

export function userRoutes(api: Api, users: UsersService): void {
  api.route({
    method: 'get',
    path: '/api/v1/user',
    tag: 'users',
    auth: 'token',
    operationId: 'getCurrentUser',
    summary: 'The authenticated user',
    returns: respond.data(userSchema, 'the user the token belongs to'),
    errors: { 403: 'the earlier variant: the token lacks the read scope' },
    handler: async ({ access }) => reply.ok(userJson(await users.get(access.user(undefined, 'read').id))),
  });
  api.route({
    method: 'get',
    path: '/api/v1/users/:username',
    params: USERNAME,
    tag: 'users',
    auth: 'public',
    operationId: 'getUserProfile',
    summary: "A user's public profile, by username (case-insensitive); no e-mail address",
    returns: respond.data(profileSchema, 'the profile'),
    errors: { 404: 'no such user' },
    handler: async ({ params }) => reply.ok(profileJson(await users.byUsername(params.username))),
  });
  api.route({
    method: 'get',
    path: '/api/v1/user/tokens',
    tag: 'users',
    auth: 'token',
    operationId: 'listTokens',
    summary: "The caller's tokens, without token values (paged list, oldest first)",
    query: pageQuery(),
    returns: respond.list(tokenSchema, "the caller's tokens, oldest first"),
    errors: { 403: CI_CREDENTIAL },
    handler: async ({ access, query }) => reply.list(await users.listTokens(tokenOwner(access).id, query)),
  });
  api.route({
    method: 'post',
    path: '/api/v1/user/tokens',
    tag: 'users',
    auth: 'token',
    operationId: 'createToken',
    summary: 'Create a token; the plaintext `token` is returned only here',
    body: createTokenBody,
    earlier: { body: earlierCreateTokenBody },
    returns: respond.created(newTokenSchema, 'the new token with its plaintext', (t) =>
      apiPath('user', 'tokens', t.id),
    ),
    errors: {
      403: 'a scope the calling token does not hold, a reach beyond its own target, or a CI clone credential',
      404: 'the target organization or repository does not exist or the caller is not a member',
      409: 'the user already holds TRIAD_MAX_TOKENS_PER_USER tokens (`limit_exceeded`)',
    },
    links: { deleteToken: { id: '$response.body#/data/id' } },
    handler: async ({ access, body }) => {
      const user = tokenOwner(access);
      const p = access.principal;
      return reply.created(await users.createToken(user.id, body, p.kind === 'user' ? p.grant : undefined));
    },
  });
  api.route({
    method: 'delete',
    path: '/api/v1/user/tokens/:id',
    params: { id: pathInt },
    tag: 'users',
    auth: 'token',
    operationId: 'deleteToken',
    summary: 'Permanently delete one of the caller’s tokens',
    returns: respond.empty('the token is deleted'),
    errors: { 403: CI_CREDENTIAL, 404: 'no token of the caller has this id' },
    handler: async ({ access, params }) => {
      await users.deleteToken(tokenOwner(access).id, params.id);
      return reply.noContent();
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/admin/users',
    tag: 'admin',
    auth: 'admin',
    operationId: 'createUser',
    summary: 'Create a user (site admin)',
    body: createUserBody,
    returns: respond.created(userSchema, 'the new user', (u) => apiPath('admin', 'users', u.username)),
    errors: { 409: 'the username is taken (case-insensitive)' },
    links: {
      getUser: { username: '$response.body#/data/username' },
      createUserToken: { username: '$response.body#/data/username' },
    },
    handler: async ({ body }) => reply.created(userJson(await users.create(body))),
  });
  api.route({
    method: 'post',
    path: '/api/v1/admin/users/:username/tokens',
    params: USERNAME,
    tag: 'admin',
    auth: 'admin',
    operationId: 'createUserToken',
    summary: 'Create a token for a user (site admin); same body and response as POST /api/v1/user/tokens',
    body: createTokenBody,
    earlier: { body: earlierCreateTokenBody },
    returns: respond.created(newTokenSchema, 'the new token with its plaintext'),
    errors: {
      404: 'no such user, or the target organization or repository does not exist',
      409: 'the user already holds TRIAD_MAX_TOKENS_PER_USER tokens (`limit_exceeded`)',
    },
    handler: async ({ access, body, params }) => {
      const user = await users.byUsername(params.username);
      // A site admin may grant any scope to anyone, but not beyond the expiry of its own token.
      const p = access.principal;
      const minter = p.kind === 'user' ? p.grant : undefined;
      return reply.created(await users.createToken(user.id, body, minter, { checkReach: false }));
    },
  });
  api.route({
    method: 'patch',
    path: '/api/v1/admin/users/:username',
    params: USERNAME,
    tag: 'admin',
    auth: 'admin',
    operationId: 'updateUser',
    summary:
      "Change a user's e-mail, display name, administrator flag or web password (site admin); a new password ends the user's web sessions",
    body: updateUserBody,
    returns: respond.data(userSchema, 'the user (never its password)'),
    errors: { 404: 'no such user', 409: 'the last site administrator would lose the flag' },
    handler: async ({ body, params }) => reply.ok(userJson(await users.update(params.username, body))),
  });
  api.route({
    method: 'get',
    path: '/api/v1/admin/users/:username',
    params: USERNAME,
    tag: 'admin',
    auth: 'admin',
    operationId: 'getUser',
    summary: 'A user by username, case-insensitive (site admin)',
    returns: respond.data(userSchema, 'the user'),
    errors: { 404: 'no such user' },
    handler: async ({ params }) => reply.ok(userJson(await users.byUsername(params.username))),
  });
}
