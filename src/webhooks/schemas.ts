import { z } from 'zod';

/** Event types a webhook may subscribe to (the spec's current variant). */
export const WEBHOOK_EVENT_TYPES = [
  'push',
  'tag',
  'pull_request.opened',
  'pull_request.closed',
  'pull_request.merged',
  'pull_request.commented',
  'issue.opened',
  'issue.closed',
  'issue.reopened',
  'issue.commented',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
const KNOWN = new Set<string>(WEBHOOK_EVENT_TYPES);

/** The event of a ping and the history entry written when the service disables a webhook. */
export const PING_EVENT = 'ping';
export const DISABLED_ENTRY = 'webhook.disabled';

const urlSchema = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(2048)
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
  });

const eventsSchema = z
  .array(z.string().max(64))
  .min(1, 'subscribe to at least one event')
  .max(WEBHOOK_EVENT_TYPES.length * 2)
  .superRefine((events, ctx) => {
    events.forEach((e, i) => {
      if (!KNOWN.has(e)) {
        ctx.addIssue({
          code: 'custom',
          path: [i],
          message: `unknown event type "${e}" (known: ${WEBHOOK_EVENT_TYPES.join(', ')})`,
        });
      }
    });
  })
  .transform((events) => [...new Set(events)]);

/** A secret: "" or null means none. */
const secretSchema = z
  .string()
  .max(256)
  .nullable()
  .transform((s) => (s === null || s === '' ? null : s));

export const createWebhookBody = z
  .object({
    url: urlSchema,
    secret: secretSchema.optional(),
    events: eventsSchema,
    is_active: z.boolean().optional(),
  })
  .strict();
export type CreateWebhookBody = z.infer<typeof createWebhookBody>;

export const updateWebhookBody = z
  .object({
    url: urlSchema.optional(),
    secret: secretSchema.optional(),
    events: eventsSchema.optional(),
    is_active: z.boolean().optional(),
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
// Rows (declared once, read by the repository) and their JSON
// ---------------------------------------------------------------------------------------------

export type WebhookRow = {
  id: number;
  org_id: number;
  repo_id: number | null;
  url: string;
  secret: string | null;
  events: string[];
  is_active: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  created_at: Date;
  updated_at: Date;
  last_id: string | null;
  last_success: boolean | null;
  last_response_code: number | null;
  last_delivered_at: Date | null;
};

export type DeliveryRow = {
  id: string;
  webhook_id: number;
  delivery_id: string;
  event_id: string | null;
  event_type: string;
  attempt: number;
  redelivery: boolean;
  success: boolean;
  response_code: number;
  duration_ms: number;
  error: string | null;
  delivered_at: Date;
};

export type RequestRecord = { url: string; headers: Record<string, string>; body: string };
export type ResponseRecord = { headers: Record<string, string>; body: string };
export type DeliveryDetailRow = DeliveryRow & {
  request: RequestRecord | null;
  response: ResponseRecord | null;
};

const iso = (d: Date | string): string => new Date(d).toISOString();
const num = (v: string | number | null): number | null => (v === null ? null : Number(v));

export function webhookJson(w: WebhookRow) {
  return {
    id: w.id,
    url: w.url,
    events: w.events,
    is_active: w.is_active,
    has_secret: w.secret !== null,
    disabled_reason: w.disabled_reason,
    created_at: iso(w.created_at),
    updated_at: iso(w.updated_at),
    last_delivery:
      w.last_id === null
        ? null
        : {
            id: Number(w.last_id),
            success: w.last_success,
            response_code: w.last_response_code,
            delivered_at: w.last_delivered_at === null ? null : iso(w.last_delivered_at),
          },
  };
}
export type WebhookJson = ReturnType<typeof webhookJson>;

export function deliveryJson(d: DeliveryRow) {
  return {
    id: Number(d.id),
    event_type: d.event_type,
    response_code: d.response_code,
    duration_ms: d.duration_ms,
    success: d.success,
    delivered_at: iso(d.delivered_at),
    delivery_id: d.delivery_id,
    attempt: d.attempt,
    event_id: num(d.event_id),
    redelivery: d.redelivery,
    error: d.error,
  };
}

export function deliveryDetailJson(d: DeliveryDetailRow) {
  return { ...deliveryJson(d), request: d.request, response: d.response };
}

// ---------------------------------------------------------------------------------------------
// The envelope every delivery carries
// ---------------------------------------------------------------------------------------------

export type RepositoryInfo = { id: number; name: string; org: string; url: string };
export type SenderInfo = { id: number; display_name: string };

/** The spec's envelope as the exact bytes sent (the same for every attempt of a delivery). */
export function envelope(e: {
  event: string;
  deliveryId: string;
  repository: RepositoryInfo | null;
  sender: SenderInfo | null;
  timestamp: Date;
  payload: unknown;
}): string {
  return JSON.stringify({
    event: e.event,
    delivery_id: e.deliveryId,
    repository: e.repository,
    sender: e.sender,
    timestamp: e.timestamp.toISOString(),
    payload: e.payload,
  });
}
