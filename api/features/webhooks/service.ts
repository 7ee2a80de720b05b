import { randomBytes } from 'node:crypto';
import { actingUser } from '../../auth/principal';
import { badRequest, notFound, retryLater } from '../../http/errors';
import { OutboundTargetError, type OutboundClient } from '../../http/outbound';
import { newId } from '../../infra/ids';
import type { Cache } from '../../infra/cache';
import type { Sql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit } from '../audit/writer';
import type { Caller } from '../projects/common';
import type { DeliveryAttempt, DeliveryQueue, DeliveryRecord, DeliveryStore } from './deliveries';
import type { WebhookStore } from './store';
import { FLAG_EVENTS } from '../flags/types';
import { type WebhookInput, type WebhookPatch, type WebhookRecord } from './types';

export interface WebhookServiceDeps {
  sql: Sql;
  store: WebhookStore;
  deliveries: DeliveryStore;
  /** Test sends go through the same delivery lane as flag events (signed, logged). */
  queue: DeliveryQueue;
  /** Counts test sends per webhook across replicas. */
  cache: Cache;
  outbound: OutboundClient;
}

/** The event of a test send (docs/api-reference.md#webhooks); never subscribed to, sent on request only. */
export const WEBHOOK_TEST_EVENT = 'webhook.test';
/** Test sends per webhook per minute (docs/limits.md#rate-limits). */
export const TEST_SENDS_PER_MINUTE = 10;
/** How long a test send waits for its single attempt (the attempt itself is bounded at 10 s). */
const TEST_SEND_WAIT_MS = 15_000;

export interface WebhookTestResult {
  delivered: boolean;
  status: DeliveryRecord['status'];
  deliveryId: string;
  statusCode: number | null;
  durationMs: number | null;
  error: string | null;
}

export interface DeliveryView {
  id: string;
  event: string;
  eventId: string;
  flagKey: string | null;
  status: DeliveryRecord['status'];
  attemptCount: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  completedAt: string | null;
  attempts: DeliveryAttempt[];
  payload: unknown;
}

/** A fresh secret in the Standard Webhooks form, usable as-is by their verifier libraries. */
export const generateWebhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/**
 * Project webhooks (docs/api-reference.md#webhooks). The routes let only callers with
 * settings:manage on the webhook's project see or change it (access rules, webhooks/routes.ts);
 * anyone else gets the same 404 as for a missing id.
 */
export class WebhookService {
  constructor(private readonly deps: WebhookServiceDeps) {}

  /** The project owning a webhook, null when there is no such webhook (the routes' access rule). */
  async projectOf(id: string): Promise<string | null> {
    return (await this.deps.store.findById(this.deps.sql, id))?.projectId ?? null;
  }

  async list(projectId: string): Promise<WebhookRecord[]> {
    return this.deps.store.listByProject(this.deps.sql, projectId);
  }

  async create(caller: Caller, input: WebhookInput): Promise<WebhookRecord & { secret: string }> {
    const url = await this.checkUrl(input.url);
    const secret = input.secret ?? generateWebhookSecret();
    const webhook = await this.deps.sql.begin(async (tx) => {
      const created = await this.deps.store.insert(tx, {
        id: newId('whk'),
        projectId: input.projectId,
        url,
        secret,
        events: input.events ?? [...FLAG_EVENTS],
        active: input.active ?? true,
        createdBy: actingUser(caller.principal)?.id ?? (caller.principal.type === 'project_api_token' ? caller.principal.createdBy : null),
      });
      await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
        projectId: created.projectId,
        action: 'webhook.create',
        resourceType: 'webhook',
        resourceId: created.id,
        resourceName: created.url,
        after: created,
      });
      return created;
    });
    return { ...webhook, secret };
  }

  async get(id: string): Promise<WebhookRecord> {
    const webhook = await this.deps.store.findById(this.deps.sql, id);
    if (!webhook) throw notFound('Webhook');
    return webhook;
  }

  async update(caller: Caller, id: string, patch: WebhookPatch): Promise<WebhookRecord> {
    const url = patch.url === undefined ? undefined : await this.checkUrl(patch.url);
    return this.deps.sql.begin(async (tx) => {
      const before = await this.deps.store.findById(tx, id, { forUpdate: true });
      if (!before) throw notFound('Webhook');
      const after = await this.deps.store.update(tx, id, { ...patch, url });
      await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
        projectId: after.projectId,
        action: 'webhook.update',
        resourceType: 'webhook',
        resourceId: id,
        resourceName: after.url,
        before,
        after,
        metadata: patch.secret !== undefined ? { secretChanged: true } : {},
      });
      return after;
    });
  }

  async remove(caller: Caller, id: string): Promise<void> {
    await this.deps.sql.begin(async (tx) => {
      const before = await this.deps.store.findById(tx, id, { forUpdate: true });
      if (!before) throw notFound('Webhook');
      await this.deps.store.remove(tx, id);
      await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
        projectId: before.projectId,
        action: 'webhook.delete',
        resourceType: 'webhook',
        resourceId: id,
        resourceName: before.url,
        before,
      });
    });
  }

  /**
   * Sends a signed `webhook.test` event with a single attempt through the delivery lane (so it is
   * in the delivery log) and reports what the endpoint answered; a paused webhook's is skipped.
   */
  async testSend(id: string): Promise<WebhookTestResult> {
    const webhook = await this.get(id);
    const { count, resetMs } = await this.deps.cache.hit(`webhook-test:${id}`, 60);
    if (count > TEST_SENDS_PER_MINUTE) {
      throw retryLater(429, `Too many test sends: ${TEST_SENDS_PER_MINUTE} per minute per webhook`, (resetMs - Date.now()) / 1000);
    }
    const eventId = newId('wht');
    const body = JSON.stringify({
      event: WEBHOOK_TEST_EVENT,
      timestamp: new Date().toISOString(),
      data: { projectId: webhook.projectId, webhookId: webhook.id, message: 'This is a test event from the feature flag service. No action is needed.' },
    });
    const { deliveryId } = await this.deps.queue.enqueue({ target: { kind: 'webhook', webhookId: id }, event: WEBHOOK_TEST_EVENT, eventId, body, maxAttempts: 1 });
    const settled = await this.deps.queue.settle(deliveryId, TEST_SEND_WAIT_MS);
    const [attempt] = (await this.deps.deliveries.attempts(this.deps.sql, [deliveryId])).get(deliveryId) ?? [];
    const status = settled?.status ?? 'pending';
    return {
      delivered: status === 'delivered',
      status,
      deliveryId,
      statusCode: settled?.lastStatusCode ?? null,
      durationMs: attempt?.durationMs ?? null,
      error: settled?.lastError ?? (status === 'pending' ? 'no answer yet; the attempt is still running' : null),
    };
  }

  /** Recent deliveries, newest first, with every attempt: what a user needs to debug a receiver. */
  async deliveries(id: string, page: { limit: number; cursor?: string }) {
    const rows = await this.deps.deliveries.listForWebhook(this.deps.sql, id, { limit: page.limit + 1, before: page.cursor });
    const hasMore = rows.length > page.limit;
    const pageRows = rows.slice(0, page.limit);
    const attempts = await this.deps.deliveries.attempts(this.deps.sql, pageRows.map((r) => r.id));
    const deliveries: DeliveryView[] = pageRows.map((r) => ({
      id: r.id,
      event: r.event,
      eventId: r.eventId,
      flagKey: r.flagKey,
      status: r.status,
      attemptCount: r.attemptCount,
      lastStatusCode: r.lastStatusCode,
      lastError: r.lastError,
      createdAt: r.createdAt,
      completedAt: r.completedAt,
      attempts: attempts.get(r.id) ?? [],
      payload: JSON.parse(r.body),
    }));
    return { deliveries, hasMore, nextCursor: hasMore ? pageRows[pageRows.length - 1].id : null };
  }

  private async checkUrl(raw: string): Promise<string> {
    try {
      await this.deps.outbound.assertAllowedUrl(raw);
      return raw;
    } catch (error) {
      if (error instanceof OutboundTargetError) {
        throw badRequest(`Invalid url: ${error.message}`, [{ path: 'body.url', message: error.message }]);
      }
      throw error;
    }
  }
}
