import type { OutboundClient } from '../../http/outbound';
import type { ListenerRoutes } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import { DeliveryQueue, DeliveryStore } from './deliveries';
import { WebhookDispatcher } from './dispatcher';
import { webhookRoutes } from './routes';
import { WebhookService } from './service';
import { WebhookStore } from './store';

export interface WebhookFeature {
  routes: ListenerRoutes;
  /** The outbox consumer that turns flag changes into webhook deliveries. */
  consumer: WebhookDispatcher;
  /** The outbound delivery lanes (Temporal workflows) alert channels and analytics export also send through. */
  deliveries: DeliveryQueue;
}

/** Project webhooks, delivered by the Temporal delivery workflow through the SSRF guard. */
export function createWebhookFeature(deps: { sql: Sql; cache: Cache; temporal: Temporal; outbound: OutboundClient }): WebhookFeature {
  const { sql } = deps;
  const store = new WebhookStore();
  const deliveries = new DeliveryQueue(deps.temporal, sql, new DeliveryStore());
  const webhooks = new WebhookService({ sql, store, deliveries: deliveries.store, queue: deliveries, cache: deps.cache, outbound: deps.outbound });
  return {
    routes: { control: webhookRoutes({ webhooks }) },
    consumer: new WebhookDispatcher({ sql, store, queue: deliveries }),
    deliveries,
  };
}
