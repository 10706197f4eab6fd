import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Actor } from '../domain/access.ts';
import type { ApiVariant } from '../domain/variant.ts';
import type { OrgRef, RepoTarget } from '../domain/repo.ts';
import { ApiError } from '../http/errors.ts';
import { offsetOf, type Page, type PageQuery } from '../http/pagination.ts';
import { isUniqueViolation } from '../db/sql.ts';
import { envelope, repositoryInfo, type WebhookLookups } from './envelope.ts';
import * as db from './repository.ts';
import type { Owner } from './repository.ts';
import {
  DISABLED_ENTRY,
  PING_EVENT,
  checkEventNames,
  deliveryDetailJson,
  deliveryJson,
  queuedJson,
  webhookJson,
  type BulkRedeliverBody,
  type CreateWebhookBody,
  type DeliveryDetailJson,
  type DeliveryJson,
  type QueuedJson,
  type UpdateWebhookBody,
  type WebhookJson,
} from './schemas.ts';
import type { WebhookSettings } from './settings.ts';
import { targetRefusal } from './ssrf.ts';

/**
 * Whose webhooks, as the route resolved and authorised it: a repository's (`RepoTarget`), or an
 * organization's (`OrgRef`: for every repository of the organization).
 */
export type HookOwner = RepoTarget | OrgRef;

function ownerOf(o: HookOwner): Owner {
  return 'repo' in o ? { orgId: o.org.id, repoId: o.repo.id } : { orgId: o.id, repoId: null };
}

/** Webhooks one repository or organization may have. */
export const MAX_WEBHOOKS_PER_OWNER = 50;
/** The deliveries list shows this many records (the spec's 20 most recent). */
export const RECENT_DELIVERIES = 20;
/** One bulk redelivery queues at most this many deliveries. */
export const BULK_REDELIVER_MAX = 1000;

export type WebhooksDeps = {
  em: () => EntityManager;
  settings: WebhookSettings;
  lookups: WebhookLookups;
  /** Tells this server's dispatcher that jobs were queued. */
  wake: () => void;
};

/**
 * Webhook rules: the record (write-only secret, known event types, allowed targets), its
 * delivery history, redelivery and ping. Takes the owner its route resolved and authorised
 * (repository or organization) and the acting user.
 */
export class WebhooksService {
  private readonly d: WebhooksDeps;

  constructor(deps: WebhooksDeps) {
    this.d = deps;
  }

  private em(): EntityManager {
    return this.d.em();
  }

  async list(owner: HookOwner, q: PageQuery): Promise<Page<WebhookJson>> {
    const em = this.em();
    const rows = await db.page(em, ownerOf(owner), q.per_page, offsetOf(q));
    const total = await db.countOwned(em, ownerOf(owner));
    return { items: rows.map(webhookJson), total, page: q.page, perPage: q.per_page };
  }

  async get(owner: HookOwner, id: number): Promise<WebhookJson> {
    return webhookJson(await this.row(owner, id));
  }

  private async row(owner: HookOwner, id: number): Promise<db.WebhookRow> {
    const row = Number.isSafeInteger(id) ? await db.get(this.em(), ownerOf(owner), id) : undefined;
    if (row === undefined) throw ApiError.notFound('webhook');
    return row;
  }

  /** Creates a webhook of the request's API variant (`variant`: the event names it receives). */
  async create(
    owner: HookOwner,
    actor: Actor,
    body: CreateWebhookBody,
    variant: ApiVariant = 'current',
  ): Promise<WebhookJson> {
    await this.checkTarget(body.url);
    if ((await db.countOwned(this.em(), ownerOf(owner))) >= MAX_WEBHOOKS_PER_OWNER) {
      throw ApiError.limitExceeded(
        `at most ${MAX_WEBHOOKS_PER_OWNER} webhooks per repository or organization`,
      );
    }
    const id = await db.insert(this.em(), ownerOf(owner), {
      url: body.url,
      secret: body.secret ?? null,
      events: body.events,
      isActive: body.is_active ?? true,
      createdBy: actor.id,
      apiVariant: variant,
    });
    return this.get(owner, id);
  }

  async update(owner: HookOwner, id: number, body: UpdateWebhookBody): Promise<WebhookJson> {
    const before = await this.row(owner, id);
    if (body.url !== undefined) await this.checkTarget(body.url);
    const change: db.WebhookChange = {};
    if (body.url !== undefined) change.url = body.url;
    if (body.secret !== undefined) change.secret = body.secret;
    if (body.events !== undefined) {
      // a webhook keeps its variant: its events are named as that variant names them
      checkEventNames(body.events, before.api_variant);
      change.events = body.events;
    }
    // Only a change of state acts: `is_active: true` on an active webhook keeps its counters.
    if (body.is_active !== undefined && body.is_active !== before.is_active) change.isActive = body.is_active;
    await this.em().transactional((tx) => db.update(tx, id, change));
    if (change.isActive === true) this.d.wake();
    return this.get(owner, id);
  }

  async remove(owner: HookOwner, id: number): Promise<void> {
    if (!Number.isSafeInteger(id) || !(await db.remove(this.em(), ownerOf(owner), id))) {
      throw ApiError.notFound('webhook');
    }
  }

  async deliveries(owner: HookOwner, id: number): Promise<DeliveryJson[]> {
    const hook = await this.row(owner, id);
    return (await db.recent(this.em(), hook.id, RECENT_DELIVERIES)).map(deliveryJson);
  }

  async delivery(owner: HookOwner, id: number, recordId: number): Promise<DeliveryDetailJson> {
    return deliveryDetailJson((await this.record(owner, id, recordId)).d);
  }

  /** A history record of the owner's webhook, with the webhook. */
  private async record(owner: HookOwner, id: number, recordId: number) {
    const hook = await this.row(owner, id);
    const d = Number.isSafeInteger(recordId) ? await db.detail(this.em(), hook.id, recordId) : undefined;
    if (d === undefined) throw ApiError.notFound('delivery');
    return { hook, d };
  }

  /** Queues one more attempt of the delivery a history record belongs to (same delivery id and body). */
  async redeliver(owner: HookOwner, id: number, recordId: number): Promise<QueuedJson> {
    const { hook, d } = await this.record(owner, id, recordId);
    if (d.event_type === DISABLED_ENTRY || d.request === null) {
      throw ApiError.conflict('this history entry records a change of the webhook, not a delivery');
    }
    const attempt = await db.lastAttempt(this.em(), hook.id, d.delivery_id);
    try {
      await db.insertJobs(this.em(), [
        {
          webhookId: hook.id,
          deliveryId: d.delivery_id,
          eventId: d.event_id,
          eventType: d.event_type,
          body: d.request.body,
          kind: 'redelivery',
          attempt,
        },
      ]);
    } catch (e) {
      if (isUniqueViolation(e)) throw ApiError.conflict('an attempt of this delivery is already pending');
      throw e;
    }
    this.d.wake();
    return queuedJson(d.delivery_id, d.event_id, attempt + 1);
  }

  /** Queues a redelivery of every delivery whose latest attempt failed at or after `since`. */
  async redeliverFailed(owner: HookOwner, id: number, body: BulkRedeliverBody) {
    const hook = await this.row(owner, id);
    const ids = await db.queueFailedSince(this.em(), hook.id, new Date(body.since), BULK_REDELIVER_MAX);
    if (ids.length > 0) this.d.wake();
    return { queued: ids.length, delivery_ids: ids };
  }

  /** Queues a `ping` delivery (sent even when the webhook is inactive; never retried). */
  async ping(owner: HookOwner, actor: Actor, id: number): Promise<QueuedJson> {
    const hook = await this.row(owner, id);
    const { repoId } = ownerOf(owner);
    const [repos, senders] = await Promise.all([
      this.d.lookups.repositories(repoId === null ? [] : [repoId]),
      this.d.lookups.senders([actor.id]),
    ]);
    const r = repoId === null ? undefined : repos.get(repoId);
    const deliveryId = randomUUID();
    const body = envelope({
      event: PING_EVENT,
      deliveryId,
      repository: r === undefined ? null : repositoryInfo(r),
      sender: senders.get(actor.id) ?? null,
      timestamp: new Date(),
      payload: { webhook: { id: hook.id, url: hook.url, events: hook.events, is_active: hook.is_active } },
    });
    await db.insertJobs(this.em(), [
      {
        webhookId: hook.id,
        deliveryId,
        eventId: null,
        eventType: PING_EVENT,
        body,
        kind: 'ping',
        attempt: 0,
      },
    ]);
    this.d.wake();
    return queuedJson(deliveryId, null, 1);
  }

  private async checkTarget(url: string): Promise<void> {
    const why = await targetRefusal(this.d.settings.allowedHosts, new URL(url));
    if (why !== undefined) throw ApiError.validation(`body.url: refused: ${why}`);
  }
}
