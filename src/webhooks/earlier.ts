/**
 * Webhooks in the earlier API variant (docs/api-variants.md). A webhook keeps the variant of the
 * request that created it (`api_variant`). An earlier webhook subscribes to `push` (which also
 * carries tag events), `issue` (every `issue.*`) and `pull_request` (every `pull_request.*`); its
 * deliveries carry the earlier name in `X-Svc-Event` and the envelope's `event`, and the issue and
 * pull request records of their payloads in the earlier variant's shape. The envelope, headers
 * and signatures are the same in both variants.
 */
import type { ApiVariant } from '../domain/variant.ts';
import type { IssuePayload, PullRequestPayload } from '../events/catalog.ts';
import { earlierIssue } from '../issues/earlier.ts';
import { earlierPull } from '../pulls/earlier.ts';

export const EARLIER_EVENT_TYPES = ['push', 'issue', 'pull_request'] as const;
export type EarlierEventType = (typeof EARLIER_EVENT_TYPES)[number];

/** The earlier event name of an event type (`EventType`): `tag` is a `push`, `issue.*` an `issue`, … */
export function earlierEventName(type: string): string {
  if (type === 'push' || type === 'tag') return 'push';
  if (type.startsWith('issue.')) return 'issue';
  return type.startsWith('pull_request.') ? 'pull_request' : type;
}

/** The name an event is delivered under to a webhook of `variant` (what it subscribes to). */
export function deliveredAs(type: string, variant: ApiVariant): string {
  return variant === 'earlier' ? earlierEventName(type) : type;
}

/** The payload an event is delivered with to a webhook of `variant`. */
export function payloadFor(type: string, payload: unknown, variant: ApiVariant): unknown {
  if (variant === 'current') return payload;
  const name = earlierEventName(type);
  if (name === 'issue') {
    const p = payload as IssuePayload;
    return { ...p, issue: earlierIssue(p.issue) };
  }
  if (name === 'pull_request') {
    const p = payload as PullRequestPayload;
    return { ...p, pull_request: earlierPull(p.pull_request) };
  }
  return payload;
}
