import { reply, respond, type Api } from '../http/api.ts';
import { apiPath } from '../http/responses.ts';
import { pageQuery } from '../http/pagination.ts';
import type { ReposService } from './service.ts';
import { createRepoBody, repoSchema, updateRepoBody, userReposQuery } from './schemas.ts';

const NO_READ = 'a private repository and the token lacks repo:read or does not reach it';

export function repoRoutes(api: Api, repos: ReposService): void {
  api.orgRoute({
    method: 'get',
    path: '/repos',
    org: {},
    tag: 'repos',
    auth: 'public',
    operationId: 'listRepos',
    summary: 'Repositories of an organization: public ones, plus private ones the caller can read',
    query: pageQuery(),
    returns: respond.list(repoSchema, 'repositories, by name'),
    handler: async ({ access, org, query }) =>
      reply.list(await repos.listForOrg(org, await access.privateReposShown(org.id), query)),
  });
  api.route({
    method: 'get',
    path: '/api/v1/user/repos',
    tag: 'users',
    auth: 'token',
    operationId: 'listMyRepos',
    summary:
      "Repositories of the caller's organizations as far as the token reaches (private ones with repo:read)",
    query: userReposQuery,
    returns: respond.list(repoSchema, 'repositories, by organization and name (case-insensitive)'),
    errors: { 404: 'the organization named by `org` does not exist' },
    handler: async ({ access, query }) => {
      const user = access.user();
      const org = query.org === undefined ? undefined : await access.org(query.org);
      const filter = { orgId: org?.id, visibility: query.visibility };
      return reply.list(await repos.forUser({ ...access.listReach(), userId: user.id }, filter, query));
    },
  });
  api.orgRoute({
    method: 'post',
    path: '/repos',
    org: { scope: 'repo:write', role: 'member' },
    tag: 'repos',
    auth: 'token',
    operationId: 'createRepo',
    summary: 'Create a repository (repo:write, org member); `vcs` is hg (default), git or fossil',
    body: createRepoBody,
    returns: respond.created(repoSchema, 'the new repository', (r) => apiPath('repos', r.org, r.name)),
    errors: {
      403: 'not a member of the organization, or the token lacks repo:write or reach',
      409: 'the name is taken in this organization (case-insensitive)',
    },
    links: Object.fromEntries(
      [
        'getRepo',
        'updateRepo',
        'listIssues',
        'createIssue',
        'listCommits',
        'getRootTree',
        'listPipelines',
      ].map((id) => [id, { org: '$response.body#/data/org', repo: '$response.body#/data/name' }]),
    ),
    handler: async ({ org, body }) => reply.created(repos.json(await repos.create(org, body), org.name)),
  });
  api.repoRoute({
    method: 'get',
    path: '',
    repo: { scope: 'repo:read' },
    tag: 'repos',
    auth: 'public',
    operationId: 'getRepo',
    summary: 'A repository',
    returns: respond.data(repoSchema, 'the repository'),
    errors: { 403: NO_READ },
    handler: async ({ target }) => reply.ok(repos.json(await repos.get(target.repo.id), target.org.name)),
  });
  api.repoRoute({
    method: 'patch',
    path: '',
    repo: { scope: 'repo:write', role: 'owner' },
    tag: 'repos',
    auth: 'token',
    operationId: 'updateRepo',
    summary: 'Update description or visibility (repo:write, org owner)',
    body: updateRepoBody,
    returns: respond.data(repoSchema, 'the updated repository'),
    errors: { 403: 'not an owner of the organization, or the token lacks repo:write or reach' },
    handler: async ({ target, body }) =>
      reply.ok(repos.json(await repos.update(target.repo.id, body), target.org.name)),
  });
  api.repoRoute({
    method: 'delete',
    path: '',
    repo: { scope: 'admin', role: 'owner' },
    tag: 'repos',
    auth: 'token',
    operationId: 'deleteRepo',
    summary: 'Delete the repository, its storage and all its data (admin scope, org owner)',
    returns: respond.empty('the repository and all its data are deleted'),
    errors: { 403: 'not an owner of the organization, or the token lacks the admin scope or reach' },
    handler: async ({ target }) => {
      await repos.delete(target.repo.id);
      return reply.noContent();
    },
  });
}
