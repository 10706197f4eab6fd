import { reply, type Api } from '../http/api.ts';
import { pageQuery } from '../http/pagination.ts';
import { createRepoBody, updateRepoBody, type ReposService } from './service.ts';

export function repoRoutes(api: Api, repos: ReposService): void {
  api.route({
    method: 'get',
    path: '/api/v1/orgs/:org/repos',
    tag: 'repos',
    auth: 'public',
    summary: 'Repositories of an organization: public ones, plus private ones the caller can read',
    query: pageQuery(),
    handler: async ({ access, params, query }) => {
      const org = await access.org(params.org ?? '');
      return reply.list(await repos.listForOrg(org, access, query));
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/orgs/:org/repos',
    tag: 'repos',
    auth: 'token',
    summary: 'Create a repository (repo:write, org member); `vcs` is hg (default), git or fossil',
    body: createRepoBody,
    status: 201,
    handler: async ({ access, params, body }) => {
      const org = await access.org(params.org ?? '', { scope: 'repo:write', role: 'member' });
      return reply.created(repos.json(await repos.create(org, body), org.name));
    },
  });
  api.route({
    method: 'get',
    path: '/api/v1/repos/:org/:repo',
    tag: 'repos',
    auth: 'public',
    summary: 'A repository',
    handler: async ({ access, params }) => {
      const { org, repo } = await access.repo(params.org ?? '', params.repo ?? '', { scope: 'repo:read' });
      return reply.ok(repos.json(await repos.get(repo.id), org.name));
    },
  });
  api.route({
    method: 'patch',
    path: '/api/v1/repos/:org/:repo',
    tag: 'repos',
    auth: 'token',
    summary: 'Update description or visibility (repo:write, org owner)',
    body: updateRepoBody,
    handler: async ({ access, params, body }) => {
      const { org, repo } = await access.repo(params.org ?? '', params.repo ?? '', {
        scope: 'repo:write',
        role: 'owner',
      });
      return reply.ok(repos.json(await repos.update(repo.id, body), org.name));
    },
  });
  api.route({
    method: 'delete',
    path: '/api/v1/repos/:org/:repo',
    tag: 'repos',
    auth: 'token',
    summary: 'Delete the repository, its storage and all its data (admin scope, org owner)',
    status: 204,
    handler: async ({ access, params }) => {
      const { repo } = await access.repo(params.org ?? '', params.repo ?? '', {
        scope: 'admin',
        role: 'owner',
      });
      await repos.delete(repo.id);
      return reply.noContent();
    },
  });
}
