import { z } from 'zod';
import { reply, respond, type Api } from '../http/api.ts';
import type { Access } from '../http/auth.ts';
import { pageQuery } from '../http/pagination.ts';
import { pathInt, pathText, type ParamSchemas } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import {
  bulkQueuedSchema,
  bulkRedeliverBody,
  createWebhookBody,
  deliveryDetailSchema,
  deliverySchema,
  queuedSchema,
  updateWebhookBody,
  webhookSchema,
} from './schemas.ts';
import type { Owner, WebhooksService } from './service.ts';

/** The parsed path parameters of a webhook route (names as text, ids as numbers). */
type Params = Record<string, unknown>;
const text = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (typeof v === 'number' ? v : NaN);

type Group = {
  base: string;
  what: string;
  /** Operation names: `listRepoWebhooks`, `listOrgWebhooks`, … */
  op: 'Repo' | 'Org';
  /** Authorizes the caller (admin scope and org owner) and names the webhooks' owner. */
  owner: (access: Access, params: Params) => Promise<Owner>;
  /** Path of one webhook below the base URL (`Location`). */
  one: (params: Record<string, string>, id: number) => string;
  /** The schemas of the base path's parameters. */
  params: ParamSchemas;
  notFound: string;
};

const GROUPS: Group[] = [
  {
    base: '/api/v1/repos/:org/:repo/webhooks',
    what: 'repository',
    op: 'Repo',
    owner: async (access, p) => {
      const t = await access.repo(text(p.org), text(p.repo), { scope: 'admin', role: 'owner' });
      return { orgId: t.org.id, repoId: t.repo.id };
    },
    one: (p, id) => apiPath('repos', p.org ?? '', p.repo ?? '', 'webhooks', id),
    params: { org: pathText, repo: pathText },
    notFound: 'no such repository or webhook, or the repository is private and out of reach',
  },
  {
    base: '/api/v1/orgs/:org/webhooks',
    what: 'organization (every repository of the organization)',
    op: 'Org',
    owner: async (access, p) => {
      const org = await access.org(text(p.org), { scope: 'admin', role: 'owner' });
      return { orgId: org.id, repoId: null };
    },
    one: (p, id) => apiPath('orgs', p.org ?? '', 'webhooks', id),
    params: { org: pathText },
    notFound: 'no such organization or webhook',
  },
];

const FORBIDDEN = 'the token lacks the admin scope or does not reach here, or the caller is not an org owner';
const BAD_BODY =
  'invalid body (`validation_failed`): unknown event type, malformed URL, or a target address the server refuses (the message names the reason)';
const deliveryParam = pathInt;

/** Repository and organization webhooks: the same routes under two bases (admin scope + org owner). */
export function webhookRoutes(api: Api, hooks: WebhooksService): void {
  for (const g of GROUPS) {
    const one = `${g.base}/:webhook_id`;
    const id = (p: Params) => num(p.webhook_id);
    const actor = (access: Access) => ({ userId: access.user().id });
    const errors = { 403: FORBIDDEN, 404: g.notFound };
    const params: ParamSchemas = { ...g.params, webhook_id: pathInt };
    const toHook = { webhook_id: '$response.body#/data/id' };
    api.route({
      method: 'get',
      path: g.base,
      tag: 'webhooks',
      auth: 'token',
      operationId: `list${g.op}Webhooks`,
      summary: `Webhooks of a ${g.what} (paged)`,
      params: g.params,
      query: pageQuery(),
      returns: respond.list(webhookSchema, 'webhooks (never their secrets)'),
      errors,
      handler: async ({ access, params, query }) =>
        reply.list(await hooks.list(await g.owner(access, params), query)),
    });
    api.route({
      method: 'post',
      path: g.base,
      tag: 'webhooks',
      auth: 'token',
      operationId: `create${g.op}Webhook`,
      summary: `Create a webhook of a ${g.what}: {url, secret?, events[], is_active?}; the secret is write-only`,
      params: g.params,
      body: createWebhookBody,
      returns: respond.created(webhookSchema, 'the webhook', (w, p) => g.one(p, w.id)),
      errors: {
        ...errors,
        400: BAD_BODY,
        409: 'the repository or organization has 50 webhooks already (`limit_exceeded`)',
      },
      links: Object.fromEntries(
        [`get${g.op}Webhook`, `update${g.op}Webhook`, `ping${g.op}Webhook`].map((op) => [op, toHook]),
      ),
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
      operationId: `get${g.op}Webhook`,
      summary: 'A webhook',
      params,
      returns: respond.data(webhookSchema, 'the webhook'),
      errors,
      handler: async ({ access, params }) =>
        reply.ok(await hooks.get(await g.owner(access, params), id(params))),
    });
    api.route({
      method: 'patch',
      path: one,
      tag: 'webhooks',
      auth: 'token',
      operationId: `update${g.op}Webhook`,
      summary:
        'Change a webhook (url, secret, events, is_active; `is_active: true` re-enables a disabled one)',
      params,
      body: updateWebhookBody,
      returns: respond.data(webhookSchema, 'the changed webhook'),
      errors: { ...errors, 400: BAD_BODY },
      handler: async ({ access, params, body }) =>
        reply.ok(await hooks.update(await g.owner(access, params), id(params), body)),
    });
    api.route({
      method: 'delete',
      path: one,
      tag: 'webhooks',
      auth: 'token',
      operationId: `delete${g.op}Webhook`,
      summary: 'Delete a webhook with its queued deliveries and history',
      params,
      returns: respond.empty('deleted'),
      errors,
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
      operationId: `list${g.op}WebhookDeliveries`,
      summary: 'The 20 most recent delivery attempts, newest first',
      params,
      returns: respond.data(z.array(deliverySchema), 'delivery attempts and `webhook.disabled` entries'),
      errors,
      handler: async ({ access, params }) =>
        reply.ok(await hooks.deliveries(await g.owner(access, params), id(params))),
    });
    api.route({
      method: 'get',
      path: `${one}/deliveries/:delivery`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `get${g.op}WebhookDelivery`,
      summary:
        'One delivery attempt with its request and response (first 64 KiB; secret-bearing headers masked)',
      params: { ...params, delivery: deliveryParam },
      returns: respond.data(deliveryDetailSchema, 'the attempt'),
      errors: { ...errors, 404: `${g.notFound}, or no such delivery record of this webhook` },
      handler: async ({ access, params }) =>
        reply.ok(await hooks.delivery(await g.owner(access, params), id(params), num(params.delivery))),
    });
    api.route({
      method: 'post',
      path: `${one}/deliveries/:delivery/redeliver`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `redeliver${g.op}WebhookDelivery`,
      summary: 'Queue one more attempt of this delivery (same delivery id and body)',
      params: { ...params, delivery: deliveryParam },
      returns: respond.accepted(queuedSchema, 'the attempt is queued'),
      errors: {
        ...errors,
        404: `${g.notFound}, or no such delivery record of this webhook`,
        409: 'an attempt of this delivery is already pending, or the record is a `webhook.disabled` entry',
      },
      handler: async ({ access, params }) => {
        const owner = await g.owner(access, params);
        return reply.accepted(await hooks.redeliver(owner, id(params), num(params.delivery)));
      },
    });
    api.route({
      method: 'post',
      path: `${one}/redeliver`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `redeliverFailed${g.op}WebhookDeliveries`,
      summary: 'Queue a redelivery of every delivery that failed since a time: {since, status: "failed"}',
      params,
      body: bulkRedeliverBody,
      returns: respond.accepted(bulkQueuedSchema, 'the deliveries queued (at most 1,000)'),
      errors,
      handler: async ({ access, params, body }) => {
        const owner = await g.owner(access, params);
        return reply.accepted(await hooks.redeliverFailed(owner, id(params), body));
      },
    });
    api.route({
      method: 'post',
      path: `${one}/ping`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `ping${g.op}Webhook`,
      summary: 'Queue a `ping` delivery to test the receiver (also for an inactive webhook)',
      params,
      returns: respond.accepted(queuedSchema, 'the ping is queued'),
      errors,
      handler: async ({ access, params }) => {
        const owner = await g.owner(access, params);
        return reply.accepted(await hooks.ping(owner, actor(access), id(params)));
      },
    });
  }
}
