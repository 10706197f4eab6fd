import { reply, type Api } from '../http/api.ts';
import { listQuery, type PipelinesService } from './service.ts';

const num = (raw: string | undefined): number =>
  raw !== undefined && /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;

export function pipelineRoutes(api: Api, pipelines: PipelinesService): void {
  const base = '/api/v1/repos/:org/:repo/pipelines';
  api.route({
    method: 'get',
    path: base,
    tag: 'pipelines',
    auth: 'public',
    summary: 'Pipelines, newest first: `{total, page, per_page, pipelines}` (per_page default 20, max 50)',
    query: listQuery,
    handler: async ({ access, params, query }) => {
      const { repo } = await access.repo(params.org ?? '', params.repo ?? '', { scope: 'ci:read' });
      return reply.bare(await pipelines.list(repo.id, query));
    },
  });
  api.route({
    method: 'get',
    path: `${base}/:number`,
    tag: 'pipelines',
    auth: 'public',
    summary: 'One pipeline with its steps (bare object)',
    handler: async ({ access, params }) => {
      const { repo } = await access.repo(params.org ?? '', params.repo ?? '', { scope: 'ci:read' });
      return reply.bare(await pipelines.get(repo.id, num(params.number)));
    },
  });
  api.route({
    method: 'get',
    path: `${base}/:number/steps/:step/log`,
    tag: 'pipelines',
    auth: 'token',
    summary: 'A step log as text/plain (ci:read, token required); `:step` is a number or an exact name',
    handler: async ({ access, params, res }) => {
      const { repo } = await access.repo(params.org ?? '', params.repo ?? '', {
        scope: 'ci:read',
        authenticated: true,
      });
      await pipelines.streamLog(repo.id, num(params.number), params.step ?? '', res);
      return reply.handled();
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:number/cancel`,
    tag: 'pipelines',
    auth: 'token',
    summary: 'Cancel a pending or running pipeline and its pending/running steps (ci:write, org member)',
    handler: async ({ access, params }) => {
      const { repo } = await access.repo(params.org ?? '', params.repo ?? '', {
        scope: 'ci:write',
        role: 'member',
      });
      return reply.bare(await pipelines.cancel(repo.id, num(params.number)));
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:number/rerun`,
    tag: 'pipelines',
    auth: 'token',
    summary: 'Run the pipeline again from the same commit; returns the new pipeline (ci:write, org member)',
    status: 201,
    handler: async ({ access, params }) => {
      const { repo } = await access.repo(params.org ?? '', params.repo ?? '', {
        scope: 'ci:write',
        role: 'member',
      });
      const user = access.user();
      return reply.bare(await pipelines.rerun(repo.id, num(params.number), user.id), 201);
    },
  });
}
