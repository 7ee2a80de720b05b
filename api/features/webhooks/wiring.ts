import type { OutboundClient } from '../../http/outbound';
import type { AnyRoute } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { Temporal } from '../../infra/temporal';
import type { SendThrottle } from '../accounts/throttle';
import { alertChannelRoutes } from '../alert-channels/routes';
import { AlertChannelService } from '../alert-channels/service';
import { AlertChannelStore } from '../alert-channels/store';
import type { NotifyOrgAlertChannels } from '../alert-channels/types';
import type { MailQueue } from '../../lib/mail/mail-queue';
import { DeliveryQueue, DeliveryStore } from './deliveries';
import { WebhookDispatcher } from './dispatcher';
import { webhookRoutes } from './routes';
import { WebhookService } from './service';
import { WebhookStore } from './store';

export interface EventDeliveryDeps {
  sql: Sql;
  temporal: Temporal;
  mail: MailQueue;
  outbound: OutboundClient;
  sends: SendThrottle;
  publicBaseUrl: string;
  logger: Logger;
}

export interface EventDeliveryFeatures {
  routes: AnyRoute[];
  /** The outbox consumer that turns flag changes into webhook deliveries. */
  webhookConsumer: WebhookDispatcher;
  /** For release safety: notify an organization's alert channels, returns those notified. */
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
  deliveries: DeliveryQueue;
}

/** Webhooks and organization alert channels, both delivered by the Temporal delivery workflow. */
export function createEventDeliveryFeatures(deps: EventDeliveryDeps): EventDeliveryFeatures {
  const { sql, outbound } = deps;
  const webhookStore = new WebhookStore();
  const deliveries = new DeliveryQueue(deps.temporal, new DeliveryStore(sql));
  const webhooks = new WebhookService({ sql, store: webhookStore, deliveries: deliveries.store, outbound });
  const alertChannels = new AlertChannelService({
    sql,
    store: new AlertChannelStore(),
    queue: deliveries,
    mail: deps.mail,
    outbound,
    sends: deps.sends,
    publicBaseUrl: deps.publicBaseUrl,
    logger: deps.logger,
  });
  return {
    routes: [...webhookRoutes({ webhooks }), ...alertChannelRoutes({ alertChannels })],
    webhookConsumer: new WebhookDispatcher({ sql, store: webhookStore, queue: deliveries }),
    notifyOrgAlertChannels: alertChannels.notifyOrgAlertChannels,
    deliveries,
  };
}
