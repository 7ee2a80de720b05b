import type { Sql } from '../../infra/postgres';
import type { FlagChangeEvent } from '../flags/types';
import type { DeliveryQueue } from './deliveries';
import type { WebhookStore } from './store';

/** The spec 6.1 body, serialized once: every attempt sends (and signs) these exact bytes. */
export function webhookBody(event: FlagChangeEvent): string {
  return JSON.stringify({ event: event.event, timestamp: event.timestamp, data: event.data });
}

/**
 * The outbox consumer for webhooks: one delivery workflow per (active subscribed webhook,
 * event), all of an event's deliveries recorded in one statement and started concurrently
 * (DeliveryQueue.enqueueMany). Handling an event again (the relay retries until every consumer succeeded) finds
 * the same delivery ids and starts nothing new.
 */
export class WebhookDispatcher {
  readonly name = 'webhooks';

  constructor(
    private readonly deps: { sql: Sql; store: WebhookStore; queue: DeliveryQueue },
  ) {}

  async handle(event: FlagChangeEvent): Promise<void> {
    const webhooks = await this.deps.store.subscribers(this.deps.sql, event.data.projectId, event.event);
    if (!webhooks.length) return;
    const body = webhookBody(event);
    await this.deps.queue.enqueueMany(
      webhooks.map((webhook) => ({
        target: { kind: 'webhook' as const, webhookId: webhook.id },
        event: event.event,
        eventId: event.id,
        flagKey: event.data.flagKey,
        body,
      })),
    );
  }
}
