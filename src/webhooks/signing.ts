import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/** Secrets as key objects, made once per secret (a hot path: every attempt signs twice). */
const keys = new Map<string, KeyObject>();
function key(secret: string): KeyObject {
  let k = keys.get(secret);
  if (k === undefined) {
    if (keys.size >= 1000) keys.clear();
    k = createSecretKey(Buffer.from(secret, 'utf8'));
    keys.set(secret, k);
  }
  return k;
}

/** The user agent of every delivery (the spec's neutral `Svc` token). */
export const USER_AGENT = 'Svc-Webhooks/1.0';

/** `sha256=<hex>`: HMAC-SHA256 of the exact body bytes, keyed with the secret (`X-Svc-Signature-256`). */
export function svcSignature(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', key(secret)).update(body).digest('hex')}`;
}

/**
 * Standard Webhooks `webhook-signature`: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`
 * keyed with the secret's UTF-8 bytes (a Standard Webhooks library takes the secret as
 * `whsec_` + base64 of those bytes).
 */
export function standardSignature(secret: string, id: string, timestamp: number, body: Buffer): string {
  const mac = createHmac('sha256', key(secret)).update(`${id}.${timestamp}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

export type Attempt = {
  eventType: string;
  deliveryId: string;
  attempt: number;
  secret: string | null;
  body: Buffer;
  /** Unix seconds of this attempt (`webhook-timestamp`). */
  now: number;
};

/** Every header of one delivery attempt; signatures only when the webhook has a secret. */
export function deliveryHeaders(a: Attempt): Record<string, string> {
  const h: Record<string, string> = {
    'Content-Type': 'application/json',
    'Content-Length': String(a.body.length),
    'User-Agent': USER_AGENT,
    'X-Svc-Event': a.eventType,
    'X-Svc-Delivery': a.deliveryId,
    'X-Svc-Delivery-Attempt': String(a.attempt),
    'webhook-id': a.deliveryId,
    'webhook-timestamp': String(a.now),
  };
  if (a.secret !== null) {
    h['X-Svc-Signature-256'] = svcSignature(a.secret, a.body);
    h['webhook-signature'] = standardSignature(a.secret, a.deliveryId, a.now, a.body);
  }
  return h;
}

const MASK = '[masked]';
const SECRET_HEADER =
  /^(authorization|proxy-authorization|cookie|set-cookie|x-svc-signature-256|webhook-signature)$|token|secret|password|passwd|api[-_]?key|session|signature/i;

/** Headers as shown in the delivery history: values that carry or derive from a secret are masked. */
export function maskHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) continue;
    out[k] = SECRET_HEADER.test(k) ? MASK : Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}
