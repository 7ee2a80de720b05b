import type { Sql } from '../../infra/postgres';
import type { FlagChangeEvent } from '../flags/types';
import { WEBHOOKS_CONSUMER, type ChangeRequestEvent } from '../../lib/outbox/store';
import type { DeliveryQueue } from './deliveries';
import type { WebhookStore } from './store';
import type { WebhookEvent } from './types';

/** What the webhooks consumer receives: flag changes, and change requests' steps (enqueueChangeRequestEvent). */
type WebhookOutboxEvent = FlagChangeEvent | ChangeRequestEvent;

/**
 * The delivery body (docs/api-reference.md#webhooks), serialized once: every attempt sends (and
 * signs) these exact bytes.
 */
export function webhookBody(event: WebhookOutboxEvent): string {
  return JSON.stringify({ event: event.event, timestamp: event.timestamp, data: event.data });
}

/**
 * The outbox consumer for webhooks: one delivery per (active subscribed webhook, event), recorded
 * in one statement per batch and handed to each webhook's delivery lane with one signal
 * (DeliveryQueue.enqueueMany). A burst of one flag's changes is one batch (handleMany). Handling
 * an event again (the relay retries until the consumer succeeded) finds the same delivery ids and
 * queues nothing new.
 */
export class WebhookDispatcher {
  readonly name = WEBHOOKS_CONSUMER;

  constructor(
    private readonly deps: { sql: Sql; store: WebhookStore; queue: DeliveryQueue },
  ) {}

  handle(event: WebhookOutboxEvent): Promise<void> {
    return this.handleMany([event]);
  }

  async handleMany(events: WebhookOutboxEvent[]): Promise<void> {
    const subscribers = new Map<string, Awaited<ReturnType<WebhookStore['subscribers']>>>();
    const deliveries = [];
    for (const event of events) {
      const key = `${event.data.projectId}\u0000${event.event}`;
      let webhooks = subscribers.get(key);
      if (!webhooks) {
        webhooks = await this.deps.store.subscribers(this.deps.sql, event.data.projectId, event.event as WebhookEvent);
        subscribers.set(key, webhooks);
      }
      if (!webhooks.length) continue;
      const body = webhookBody(event);
      for (const webhook of webhooks) {
        deliveries.push({ target: { kind: 'webhook' as const, webhookId: webhook.id }, event: event.event, eventId: event.id, flagKey: 'flagKey' in event.data ? event.data.flagKey : null, body });
      }
    }
    if (deliveries.length) await this.deps.queue.enqueueMany(deliveries);
  }
}
