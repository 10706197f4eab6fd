import type {
  DeliveryDetailJson,
  DeliveryJson,
  QueuedJson,
  WebhookEventType,
  WebhookJson,
} from './schemas.ts';

/** Rows of the webhooks feature (declared once, read by its repositories) and their JSON. */

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

export function webhookJson(w: WebhookRow): WebhookJson {
  return {
    id: w.id,
    url: w.url,
    // Only known types are ever stored (the request schema refuses others).
    events: w.events as WebhookEventType[],
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
            success: w.last_success ?? false,
            response_code: w.last_response_code ?? 0,
            delivered_at: iso(w.last_delivered_at ?? w.updated_at),
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
    delivered_at: iso(d.delivered_at),
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
