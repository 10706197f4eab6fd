import { reply, type Api } from '../http/api.ts';
import type { Access } from '../http/auth.ts';
import { pageQuery } from '../http/pagination.ts';
import { bulkRedeliverBody, createWebhookBody, updateWebhookBody } from './schemas.ts';
import type { Owner, WebhooksService } from './service.ts';

/** A path number: digits only (anything else names nothing: 404 in the service). */
const num = (raw: string | undefined): number =>
  raw !== undefined && /^\d{1,15}$/.test(raw) ? Number(raw) : NaN;

type Group = {
  base: string;
  what: string;
  /** Authorizes the caller (admin scope and org owner) and names the webhooks' owner. */
  owner: (access: Access, params: Record<string, string>) => Promise<Owner>;
};

const GROUPS: Group[] = [
  {
    base: '/api/v1/repos/:org/:repo/webhooks',
    what: 'repository',
    owner: async (access, p) => {
      const t = await access.repo(p.org ?? '', p.repo ?? '', { scope: 'admin', role: 'owner' });
      return { orgId: t.org.id, repoId: t.repo.id };
    },
  },
  {
    base: '/api/v1/orgs/:org/webhooks',
    what: 'organization (every repository of the organization)',
    owner: async (access, p) => {
      const org = await access.org(p.org ?? '', { scope: 'admin', role: 'owner' });
      return { orgId: org.id, repoId: null };
    },
  },
];

/** Repository and organization webhooks: the same routes under two bases (admin scope + org owner). */
export function webhookRoutes(api: Api, hooks: WebhooksService): void {
  for (const g of GROUPS) {
    const one = `${g.base}/:webhook_id`;
    const id = (p: Record<string, string>) => num(p.webhook_id);
    const actor = (access: Access) => ({ userId: access.user().id });
    api.route({
      method: 'get',
      path: g.base,
      tag: 'webhooks',
      auth: 'token',
      summary: `Webhooks of a ${g.what} (paged)`,
      query: pageQuery(),
      handler: async ({ access, params, query }) =>
        reply.list(await hooks.list(await g.owner(access, params), query)),
    });
    api.route({
      method: 'post',
      path: g.base,
      tag: 'webhooks',
      auth: 'token',
      summary: `Create a webhook of a ${g.what}: {url, secret?, events[], is_active?}; the secret is write-only`,
      body: createWebhookBody,
      status: 201,
      handler: async ({ access, params, body }) => {
        const owner = await g.owner(access, params);
        return reply.created(await hooks.create(owner, actor(access), body));
      },
    });
    api.route({
      method: 'get',
      path: one,
      tag: 'webhooks',
      auth: 'token',
      summary: 'A webhook',
      handler: async ({ access, params }) =>
        reply.ok(await hooks.get(await g.owner(access, params), id(params))),
    });
    api.route({
      method: 'patch',
      path: one,
      tag: 'webhooks',
      auth: 'token',
      summary:
        'Change a webhook (url, secret, events, is_active; `is_active: true` re-enables a disabled one)',
      body: updateWebhookBody,
      handler: async ({ access, params, body }) =>
        reply.ok(await hooks.update(await g.owner(access, params), id(params), body)),
    });
    api.route({
      method: 'delete',
      path: one,
      tag: 'webhooks',
      auth: 'token',
      summary: 'Delete a webhook with its queued deliveries and history',
      status: 204,
      handler: async ({ access, params }) => {
        await hooks.remove(await g.owner(access, params), id(params));
        return reply.noContent();
      },
    });
    api.route({
      method: 'get',
      path: `${one}/deliveries`,
      tag: 'webhooks',
      auth: 'token',
      summary: 'The 20 most recent delivery attempts, newest first',
      handler: async ({ access, params }) =>
        reply.ok(await hooks.deliveries(await g.owner(access, params), id(params))),
    });
    api.route({
      method: 'get',
      path: `${one}/deliveries/:delivery`,
      tag: 'webhooks',
      auth: 'token',
      summary:
        'One delivery attempt with its request and response (first 64 KiB; secret-bearing headers masked)',
      handler: async ({ access, params }) =>
        reply.ok(await hooks.delivery(await g.owner(access, params), id(params), num(params.delivery))),
    });
    api.route({
      method: 'post',
      path: `${one}/deliveries/:delivery/redeliver`,
      tag: 'webhooks',
      auth: 'token',
      summary: 'Queue one more attempt of this delivery (same delivery id and body)',
      status: 202,
      handler: async ({ access, params }) => {
        const owner = await g.owner(access, params);
        return reply.bare({ data: await hooks.redeliver(owner, id(params), num(params.delivery)) }, 202);
      },
    });
    api.route({
      method: 'post',
      path: `${one}/redeliver`,
      tag: 'webhooks',
      auth: 'token',
      summary: 'Queue a redelivery of every delivery that failed since a time: {since, status: "failed"}',
      body: bulkRedeliverBody,
      status: 202,
      handler: async ({ access, params, body }) => {
        const owner = await g.owner(access, params);
        return reply.bare({ data: await hooks.redeliverFailed(owner, id(params), body) }, 202);
      },
    });
    api.route({
      method: 'post',
      path: `${one}/ping`,
      tag: 'webhooks',
      auth: 'token',
      summary: 'Queue a `ping` delivery to test the receiver',
      status: 202,
      handler: async ({ access, params }) => {
        const owner = await g.owner(access, params);
        return reply.bare({ data: await hooks.ping(owner, actor(access), id(params)) }, 202);
      },
    });
  }
}
