import { EVENT_TYPES, type EventType } from '../events/catalog.ts';
import { API_VARIANTS, type ApiVariant } from '../domain/variant.ts';
import { ApiError } from '../http/errors.ts';
import { EARLIER_EVENT_TYPES } from './earlier.ts';
import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { timestamp } from '../http/responses.ts';
import type { DeliveryDetailRow, DeliveryRow, WebhookRow } from './repository.ts';

/** The event types a webhook may subscribe to: every type of the event catalog. */
export const WEBHOOK_EVENT_TYPES = EVENT_TYPES as readonly [EventType, ...EventType[]];
export type WebhookEventType = EventType;
/** The names a webhook's `events` may hold: those of either variant (`api_variant` says which). */
export const ANY_EVENT_NAMES = [...new Set<string>([...WEBHOOK_EVENT_TYPES, ...EARLIER_EVENT_TYPES])] as [
  string,
  ...string[],
];
/** The event names a webhook of each variant subscribes to. */
export const EVENT_NAMES: Record<ApiVariant, readonly string[]> = {
  current: WEBHOOK_EVENT_TYPES,
  earlier: EARLIER_EVENT_TYPES,
};

/** The event of a ping and the history entry written when the service disables a webhook. */
export const PING_EVENT = 'ping';
export const DISABLED_ENTRY = 'webhook.disabled';

// ---------------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------------

const urlSchema = z
  .string()
  .max(2048)
  .trim()
  .min(1, 'must not be empty')
  .transform((v, ctx) => {
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be an absolute http(s) URL' });
      return z.NEVER;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: 'must be an http or https URL' });
      return z.NEVER;
    }
    if (u.username !== '' || u.password !== '') {
      ctx.addIssue({
        code: 'custom',
        message: 'must not contain credentials (use the secret to authenticate)',
      });
      return z.NEVER;
    }
    u.hash = '';
    return u.toString();
  })
  .meta({ description: 'http(s) URL the deliveries are POSTed to; must be an allowed target' });

/** A list of event names, each one of `names` (a webhook's own variant's). */
function eventsSchema(names: readonly string[], description: string) {
  const known = new Set(names);
  return z
    .array(z.string().max(64))
    .min(1, 'subscribe to at least one event')
    .max(ANY_EVENT_NAMES.length * 2)
    .superRefine((events, ctx) => {
      events.forEach((e, i) => {
        if (!known.has(e)) {
          ctx.addIssue({
            code: 'custom',
            path: [i],
            message: `unknown event type "${e}" (known: ${names.join(', ')})`,
          });
        }
      });
    })
    .transform((events) => [...new Set(events)])
    .meta({ description });
}
const currentEvents = eventsSchema(
  WEBHOOK_EVENT_TYPES,
  `subscribed event types: ${WEBHOOK_EVENT_TYPES.join(', ')}`,
);

/** The event names of a webhook of `variant` (400 `validation_failed` naming a name it does not know). */
export function checkEventNames(events: readonly string[], variant: ApiVariant): void {
  const known = EVENT_NAMES[variant];
  const bad = events.findIndex((e) => !known.includes(e));
  if (bad >= 0) {
    throw ApiError.validation(
      `body.events.${bad}: unknown event type "${events[bad]}" for a webhook of the ${variant} API variant (known: ${known.join(', ')})`,
    );
  }
}

/** A secret: "" or null means none. */
const secretSchema = z
  .string()
  .max(256)
  .nullable()
  .transform((s) => (s === null || s === '' ? null : s))
  .meta({ description: 'signing secret (write-only); "" or null removes it' });

export const createWebhookBody = z
  .object({
    url: urlSchema,
    secret: secretSchema.optional(),
    events: currentEvents,
    is_active: z.boolean().optional(),
  })
  .strict();
export type CreateWebhookBody = z.infer<typeof createWebhookBody>;

/** Create in the earlier variant: its event names (`push`, `issue`, `pull_request`). */
export const earlierCreateWebhookBody = createWebhookBody.extend({
  events: eventsSchema(
    EARLIER_EVENT_TYPES,
    `subscribed event types: ${EARLIER_EVENT_TYPES.join(', ')} (\`push\` includes tags, \`issue\` every issue event, \`pull_request\` every pull request event)`,
  ),
});

/** A change's `events` are names of the webhook's own variant (checked by the service). */
export const updateWebhookBody = z
  .object({
    url: urlSchema.optional(),
    secret: secretSchema.optional(),
    events: eventsSchema(
      ANY_EVENT_NAMES,
      "subscribed event types, of the webhook's own API variant (`api_variant`)",
    ).optional(),
    is_active: z.boolean().optional().meta({ description: '`true` re-enables a disabled webhook' }),
  })
  .strict();
export type UpdateWebhookBody = z.infer<typeof updateWebhookBody>;

export const bulkRedeliverBody = z
  .object({
    since: z.iso.datetime({ offset: true }),
    status: z.literal('failed', { message: 'only "failed" deliveries can be redelivered in bulk' }),
  })
  .strict();
export type BulkRedeliverBody = z.infer<typeof bulkRedeliverBody>;

// ---------------------------------------------------------------------------------------------
// Responses and the mappers from rows
// ---------------------------------------------------------------------------------------------

export const webhookSchema = z
  .object({
    id: z.int(),
    url: z.string(),
    events: z.array(
      z.enum(ANY_EVENT_NAMES).meta({
        id: 'WebhookEventType',
        description: "an event type of the webhook's API variant (`api_variant`)",
      }),
    ),
    api_variant: z
      .enum(API_VARIANTS)
      .meta({ description: 'the API variant of the request that created it: the event names it receives' }),
    is_active: z.boolean(),
    has_secret: z.boolean().meta({ description: 'whether a secret is set (the secret is never returned)' }),
    disabled_reason: z
      .string()
      .nullable()
      .meta({ description: 'why the service disabled the webhook; null when it did not' }),
    created_at: timestamp,
    updated_at: timestamp,
    last_delivery: z
      .object({
        id: z.int(),
        success: z.boolean(),
        response_code: z.int(),
        delivered_at: timestamp,
      })
      .nullable()
      .meta({ id: 'WebhookLastDelivery', description: 'the latest attempt; null before the first' }),
  })
  .meta({ id: 'Webhook' });
export type WebhookJson = z.infer<typeof webhookSchema>;

export const deliverySchema = z
  .object({
    id: z.int().meta({ description: 'this record (one attempt); used in paths' }),
    event_type: z.string().meta({ description: 'the event type, `ping`, or `webhook.disabled`' }),
    response_code: z.int().meta({ description: '0 when no response arrived' }),
    duration_ms: z.int(),
    success: z.boolean(),
    delivered_at: timestamp,
    delivery_id: z.uuid().meta({ description: '`X-Svc-Delivery`: the same for every attempt' }),
    attempt: z.int().meta({ description: '1, 2, …; 0 for a `webhook.disabled` entry' }),
    event_id: z.int().nullable().meta({ description: 'the recorded event; null for a ping' }),
    redelivery: z.boolean(),
    error: z.string().nullable().meta({ description: 'timeout, refused, blocked address, HTTP status, …' }),
  })
  .meta({ id: 'WebhookDelivery' });
export type DeliveryJson = z.infer<typeof deliverySchema>;

const headersSchema = z.record(z.string(), z.string());
export const deliveryDetailSchema = z
  .object({
    ...deliverySchema.shape,
    request: z
      .object({ url: z.string(), headers: headersSchema, body: z.string() })
      .nullable()
      .meta({ id: 'WebhookRequest', description: 'secret-bearing headers masked; null for an entry' }),
    response: z
      .object({
        headers: headersSchema,
        body: z.string().meta({ description: 'the first 64 KiB' }),
      })
      .nullable()
      .meta({ id: 'WebhookResponse', description: 'null when no response arrived' }),
  })
  .meta({ id: 'WebhookDeliveryDetail' });
export type DeliveryDetailJson = z.infer<typeof deliveryDetailSchema>;

export const queuedSchema = z
  .object({
    delivery_id: z.uuid(),
    event_id: z.int().nullable(),
    attempt: z.int().meta({ description: 'the number the queued attempt will carry' }),
  })
  .meta({ id: 'WebhookQueuedDelivery' });
export type QueuedJson = z.infer<typeof queuedSchema>;

export const bulkQueuedSchema = z
  .object({ queued: z.int(), delivery_ids: z.array(z.uuid()) })
  .meta({ id: 'WebhookBulkRedelivery' });

// ---------------------------------------------------------------------------------------------
// JSON of rows
// ---------------------------------------------------------------------------------------------

const num = (v: string | number | null): number | null => (v === null ? null : Number(v));

export function webhookJson(w: WebhookRow): WebhookJson {
  return {
    id: w.id,
    url: w.url,
    events: w.events,
    api_variant: w.api_variant,
    is_active: w.is_active,
    has_secret: w.secret !== null,
    disabled_reason: w.disabled_reason,
    created_at: isoTime(w.created_at),
    updated_at: isoTime(w.updated_at),
    last_delivery:
      w.last_id === null
        ? null
        : {
            id: Number(w.last_id),
            success: w.last_success ?? false,
            response_code: w.last_response_code ?? 0,
            delivered_at: isoTime(w.last_delivered_at ?? w.updated_at),
          },
  };
}

export function deliveryJson(d: DeliveryRow): DeliveryJson {
  return {
    id: Number(d.id),
    event_type: d.event_type,
    response_code: d.response_code,
    duration_ms: d.duration_ms,
    success: d.success,
    delivered_at: isoTime(d.delivered_at),
    delivery_id: d.delivery_id,
    attempt: d.attempt,
    event_id: num(d.event_id),
    redelivery: d.redelivery,
    error: d.error,
  };
}

export function deliveryDetailJson(d: DeliveryDetailRow): DeliveryDetailJson {
  return { ...deliveryJson(d), request: d.request, response: d.response };
}

export function queuedJson(deliveryId: string, eventId: string | null, attempt: number): QueuedJson {
  return { delivery_id: deliveryId, event_id: num(eventId), attempt };
}
