import { z } from 'zod';
import { reply, respond, type Api, type GroupRouteDef, type Opt, type OptParams } from '../http/api.ts';
import { pageQuery } from '../http/pagination.ts';
import { pathInt } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import {
  bulkQueuedSchema,
  bulkRedeliverBody,
  createWebhookBody,
  deliveryDetailSchema,
  earlierCreateWebhookBody,
  deliverySchema,
  queuedSchema,
  updateWebhookBody,
  webhookSchema,
} from './schemas.ts';
import type { HookOwner, WebhooksService } from './service.ts';

/** A webhook route of a group (path relative to the group's base), its handler given the owner. */
type HookRouteDef<BS extends Opt, QS extends Opt, T, PS extends OptParams> = GroupRouteDef<
  BS,
  QS,
  T,
  PS,
  unknown,
  { owner: HookOwner }
>;

/** The webhooks of a repository or of an organization: the same routes in the two route groups. */
type Group = {
  what: string;
  /** Operation names: `listRepoWebhooks`, `listOrgWebhooks`, … */
  op: 'Repo' | 'Org';
  /** Path of one webhook below the base URL (`Location`). */
  one: (params: Record<string, string>, id: number) => string;
  notFound: string;
  /** Mounts a route in the group, the owner resolved and authorised for `MANAGE`. */
  route: <
    BS extends Opt = undefined,
    QS extends Opt = undefined,
    T = never,
    PS extends OptParams = undefined,
  >(
    def: HookRouteDef<BS, QS, T, PS>,
  ) => void;
};

/** Webhooks are managed by organization owners with the admin scope (the earlier variant: write). */
const MANAGE = { scope: 'admin', role: 'owner', earlier: 'write' } as const;

function groups(api: Api): Group[] {
  return [
    {
      what: 'repository',
      op: 'Repo',
      one: (p, id) => apiPath('repos', p.org ?? '', p.repo ?? '', 'webhooks', id),
      notFound: 'no such repository or webhook, or the repository is private and out of reach',
      route: (def) =>
        api.repoRoute({ ...def, repo: MANAGE, handler: (ctx) => def.handler({ ...ctx, owner: ctx.target }) }),
    },
    {
      what: 'organization (every repository of the organization)',
      op: 'Org',
      one: (p, id) => apiPath('orgs', p.org ?? '', 'webhooks', id),
      notFound: 'no such organization or webhook',
      route: (def) =>
        api.orgRoute({ ...def, org: MANAGE, handler: (ctx) => def.handler({ ...ctx, owner: ctx.org }) }),
    },
  ];
}

const FORBIDDEN =
  'the token lacks the admin scope (the earlier variant: write) or does not reach here, or the caller is not an org owner';
const BAD_BODY =
  'invalid body (`validation_failed`): unknown event type, malformed URL, or a target address the server refuses (the message names the reason)';
const BASE = '/webhooks';
const ONE = `${BASE}/:webhook_id`;
const HOOK = { webhook_id: pathInt };
const RECORD = { webhook_id: pathInt, delivery: pathInt };

/** Repository and organization webhooks: the same routes under two bases (admin scope + org owner). */
export function webhookRoutes(api: Api, hooks: WebhooksService): void {
  for (const g of groups(api)) {
    const errors = { 403: FORBIDDEN, 404: g.notFound };
    const toHook = { webhook_id: '$response.body#/data/id' };
    g.route({
      method: 'get',
      path: BASE,
      tag: 'webhooks',
      auth: 'token',
      operationId: `list${g.op}Webhooks`,
      summary: `Webhooks of a ${g.what} (paged)`,
      query: pageQuery(),
      returns: respond.list(webhookSchema, 'webhooks (never their secrets)'),
      errors,
      handler: async ({ owner, query }) => reply.list(await hooks.list(owner, query)),
    });
    g.route({
      method: 'post',
      path: BASE,
      tag: 'webhooks',
      auth: 'token',
      operationId: `create${g.op}Webhook`,
      summary: `Create a webhook of a ${g.what}: {url, secret?, events[], is_active?}; the secret is write-only`,
      body: createWebhookBody,
      returns: respond.created(webhookSchema, 'the webhook', (w, p) => g.one(p, w.id)),
      earlier: {
        summary: `Create a webhook of a ${g.what} (write scope): {url, secret?, events[] of push, issue, pull_request, is_active?}; it delivers under the earlier event names`,
        body: earlierCreateWebhookBody,
      },
      errors: {
        ...errors,
        400: BAD_BODY,
        409: 'the repository or organization has 50 webhooks already (`limit_exceeded`)',
      },
      links: Object.fromEntries(
        [`get${g.op}Webhook`, `update${g.op}Webhook`, `ping${g.op}Webhook`].map((op) => [op, toHook]),
      ),
      handler: async ({ access, owner, body, variant }) =>
        reply.created(await hooks.create(owner, access.actor(), body, variant)),
    });
    g.route({
      method: 'get',
      path: ONE,
      tag: 'webhooks',
      auth: 'token',
      operationId: `get${g.op}Webhook`,
      summary: 'A webhook',
      params: HOOK,
      returns: respond.data(webhookSchema, 'the webhook'),
      errors,
      handler: async ({ owner, params }) => reply.ok(await hooks.get(owner, params.webhook_id)),
    });
    g.route({
      method: 'patch',
      path: ONE,
      tag: 'webhooks',
      auth: 'token',
      operationId: `update${g.op}Webhook`,
      summary:
        'Change a webhook (url, secret, events, is_active; `is_active: true` re-enables a disabled one)',
      params: HOOK,
      body: updateWebhookBody,
      returns: respond.data(webhookSchema, 'the changed webhook'),
      errors: { ...errors, 400: BAD_BODY },
      handler: async ({ owner, params, body }) =>
        reply.ok(await hooks.update(owner, params.webhook_id, body)),
    });
    g.route({
      method: 'delete',
      path: ONE,
      tag: 'webhooks',
      auth: 'token',
      operationId: `delete${g.op}Webhook`,
      summary: 'Delete a webhook with its queued deliveries and history',
      params: HOOK,
      returns: respond.empty('deleted'),
      errors,
      handler: async ({ owner, params }) => {
        await hooks.remove(owner, params.webhook_id);
        return reply.noContent();
      },
    });
    g.route({
      method: 'get',
      path: `${ONE}/deliveries`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `list${g.op}WebhookDeliveries`,
      summary: 'The 20 most recent delivery attempts, newest first',
      params: HOOK,
      returns: respond.data(z.array(deliverySchema), 'delivery attempts and `webhook.disabled` entries'),
      errors,
      handler: async ({ owner, params }) => reply.ok(await hooks.deliveries(owner, params.webhook_id)),
    });
    g.route({
      method: 'get',
      path: `${ONE}/deliveries/:delivery`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `get${g.op}WebhookDelivery`,
      summary:
        'One delivery attempt with its request and response (first 64 KiB; secret-bearing headers masked)',
      params: RECORD,
      returns: respond.data(deliveryDetailSchema, 'the attempt'),
      errors: { ...errors, 404: `${g.notFound}, or no such delivery record of this webhook` },
      handler: async ({ owner, params }) =>
        reply.ok(await hooks.delivery(owner, params.webhook_id, params.delivery)),
    });
    g.route({
      method: 'post',
      path: `${ONE}/deliveries/:delivery/redeliver`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `redeliver${g.op}WebhookDelivery`,
      summary: 'Queue one more attempt of this delivery (same delivery id and body)',
      params: RECORD,
      returns: respond.accepted(queuedSchema, 'the attempt is queued'),
      errors: {
        ...errors,
        404: `${g.notFound}, or no such delivery record of this webhook`,
        409: 'an attempt of this delivery is already pending, or the record is a `webhook.disabled` entry',
      },
      handler: async ({ owner, params }) =>
        reply.accepted(await hooks.redeliver(owner, params.webhook_id, params.delivery)),
    });
    g.route({
      method: 'post',
      path: `${ONE}/redeliver`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `redeliverFailed${g.op}WebhookDeliveries`,
      summary: 'Queue a redelivery of every delivery that failed since a time: {since, status: "failed"}',
      params: HOOK,
      body: bulkRedeliverBody,
      returns: respond.accepted(bulkQueuedSchema, 'the deliveries queued (at most 1,000)'),
      errors,
      handler: async ({ owner, params, body }) =>
        reply.accepted(await hooks.redeliverFailed(owner, params.webhook_id, body)),
    });
    g.route({
      method: 'post',
      path: `${ONE}/ping`,
      tag: 'webhooks',
      auth: 'token',
      operationId: `ping${g.op}Webhook`,
      summary: 'Queue a `ping` delivery to test the receiver (also for an inactive webhook)',
      params: HOOK,
      returns: respond.accepted(queuedSchema, 'the ping is queued'),
      errors,
      handler: async ({ access, owner, params }) =>
        reply.accepted(await hooks.ping(owner, access.actor(), params.webhook_id)),
    });
  }
}
