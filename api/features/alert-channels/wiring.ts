import type { OutboundClient } from '../../http/outbound';
import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { MailQueue } from '../../lib/mail/mail-queue';
import type { SendThrottle } from '../accounts/throttle';
import type { DeliveryQueue } from '../webhooks/deliveries';
import { alertChannelRoutes } from './routes';
import { AlertChannelService } from './service';
import { AlertChannelStore } from './store';
import type { NotifyOrgAlertChannels } from './types';

export interface AlertChannelFeature {
  routes: ListenerRoutes;
  /** For release safety: notify an organization's alert channels, returns those notified. */
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
}

/** Organization alert channels (webhook-style URLs and confirmed e-mail recipients), sent through the webhooks' delivery lanes. */
export function createAlertChannelFeature(deps: {
  sql: Sql;
  deliveries: DeliveryQueue;
  mail: MailQueue;
  outbound: OutboundClient;
  sends: SendThrottle;
  publicBaseUrl: string;
  logger: Logger;
}): AlertChannelFeature {
  const { deliveries, ...services } = deps;
  const alertChannels = new AlertChannelService({ ...services, store: new AlertChannelStore(), queue: deliveries });
  return { routes: { control: alertChannelRoutes({ alertChannels }) }, notifyOrgAlertChannels: alertChannels.notifyOrgAlertChannels };
}
