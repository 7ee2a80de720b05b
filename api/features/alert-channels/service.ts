import type { UserRecord } from '../../auth/principal';
import { badRequest, notFound, serviceUnavailable } from '../../http/errors';
import { OutboundTargetError, type OutboundClient } from '../../http/outbound';
import { newId, randomSecret, sha256Hex } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { SendThrottle } from '../accounts/throttle';
import { requireVerifiedEmail } from '../accounts/verified';
import type { MailQueue } from '../../lib/mail/mail-queue';
import type { DeliveryQueue, DeliveryRecord, NewDelivery } from '../webhooks/deliveries';
import { generateWebhookSecret } from '../webhooks/service';
import { alertBody, alertMail } from './payloads';
import type { AlertChannelStore } from './store';
import {
  DEFAULT_PAGING_URL,
  type AlertChannelConfig,
  type AlertChannelRecord,
  type AlertChannelWithConfig,
  type NotifiedChannel,
  type OrgAlert,
} from './types';

export type AlertChannelInput =
  | { type: 'chat'; name: string; url: string; enabled?: boolean }
  | { type: 'paging'; name: string; routingKey: string; url?: string; enabled?: boolean }
  | { type: 'email'; name: string; recipients: string[]; enabled?: boolean }
  | { type: 'webhook'; name: string; url: string; secret?: string; enabled?: boolean };

export interface TestSendResult {
  ok: boolean;
  status: DeliveryRecord['status'] | 'queued';
  deliveryId: string | null;
  statusCode: number | null;
  error: string | null;
  durationMs: number | null;
}

export interface AlertChannelServiceDeps {
  sql: Sql;
  store: AlertChannelStore;
  queue: DeliveryQueue;
  mail: MailQueue;
  outbound: OutboundClient;
  /** Test sends and recipient confirmations, counted per user and per recipient. */
  sends: SendThrottle;
  /** Base of the confirmation link mailed to e-mail recipients. */
  publicBaseUrl: string;
  logger: Logger;
  /** How long a test send waits for its single attempt (the attempt itself is bounded at 10 s). */
  testSendWaitMs?: number;
}

/** Drops the stored config: what the API may show (with each e-mail recipient's confirmation). */
function publicView({ config, ...record }: AlertChannelWithConfig, confirmed?: Set<string>): AlertChannelRecord {
  if (config.type !== 'email') return record;
  return { ...record, recipients: config.recipients.map((email) => ({ email, confirmed: confirmed?.has(email) ?? false })) };
}

/** Per-recipient throttle keys: an e-mail address, or the exact URL (many tenants share hooks.slack.com). */
const httpRecipient = (url: string) => ({ id: url, shown: 'this destination' });

/**
 * Organization alert channels: every member of the organization sees them (they apply to all
 * its projects); owners and admins create, delete and test them (the routes' access rules,
 * org:view and org:manage). Delivery of HTTP channels
 * runs through the same Temporal delivery workflow and SSRF guard as webhooks; e-mail goes
 * through the mail queue.
 */
export class AlertChannelService {
  constructor(private readonly deps: AlertChannelServiceDeps) {}

  async list(orgId: string): Promise<AlertChannelRecord[]> {
    const channels = await this.deps.store.listByOrg(this.deps.sql, orgId);
    const confirmed = await this.deps.store.confirmedRecipients(this.deps.sql, channels.filter((c) => c.type === 'email').map((c) => c.id));
    return channels.map((c) => publicView(c, confirmed.get(c.id)));
  }

  /** `user`: the caller, an owner or admin of the organization. */
  async create(user: UserRecord, orgId: string, input: AlertChannelInput): Promise<AlertChannelRecord & { secret?: string }> {
    const config = await this.configFrom(input);
    const record = { id: newId('alc'), orgId, name: input.name, config, enabled: input.enabled ?? true, createdBy: user.id };
    if (config.type !== 'email') {
      const channel = await this.deps.store.insert(this.deps.sql, record);
      // A generic webhook's signing secret is shown once, like a project webhook's.
      return config.type === 'webhook' ? { ...publicView(channel), secret: config.secret } : publicView(channel);
    }

    // Each recipient confirms once before anything is mailed to them; the confirmation is mail too.
    requireVerifiedEmail(user, 'creating e-mail alert channels');
    await this.deps.sends.consume(user.id, config.recipients.map((email) => ({ id: email, shown: email })));
    const tokens = config.recipients.map(() => randomSecret(32));
    const channel = await this.deps.sql.begin(async (tx) => {
      const created = await this.deps.store.insert(tx, record);
      await this.deps.store.insertRecipients(tx, created.id, config.recipients.map((email, i) => ({ email, tokenHash: sha256Hex(tokens[i]) })));
      return created;
    });
    try {
      for (const [i, email] of config.recipients.entries()) await this.deps.mail.send(this.confirmationMail(channel, user, email, tokens[i]), `alert-confirm-${channel.id}-${i}`);
    } catch (error) {
      // A recipient who never got the token could never confirm: withdraw the channel.
      this.deps.logger.error({ err: error, channelId: channel.id }, 'alert channel confirmations could not be mailed');
      await this.deps.store.remove(this.deps.sql, channel.id);
      throw serviceUnavailable('The confirmation mails could not be sent; try again');
    }
    return publicView(channel);
  }

  /** A recipient's one-time confirmation from the mailed link. */
  async confirmRecipient(token: string): Promise<{ channelId: string; email: string; confirmed: true }> {
    const confirmed = await this.deps.store.confirmRecipient(this.deps.sql, sha256Hex(token));
    if (!confirmed) throw badRequest('Confirmation token is invalid or already used');
    return { ...confirmed, confirmed: true };
  }

  async remove(orgId: string, channelId: string): Promise<void> {
    const channel = await this.deps.store.findById(this.deps.sql, channelId);
    if (!channel || channel.orgId !== orgId) throw notFound('Alert channel');
    await this.deps.store.remove(this.deps.sql, channelId);
  }

  /** Sends a test alert with a single attempt and reports what the destination answered. */
  async testSend(user: UserRecord, orgId: string, channelId: string): Promise<TestSendResult> {
    const channel = await this.deps.store.findById(this.deps.sql, channelId);
    if (!channel || channel.orgId !== orgId) throw notFound('Alert channel');
    // A test reaches whatever the channel names, on demand: only verified users, and counted.
    requireVerifiedEmail(user, 'sending test alerts');
    const alert: OrgAlert = {
      id: newId('alt'),
      kind: 'alert.test',
      title: `Test alert for channel "${channel.name}"`,
      summary: 'This is a test notification from the feature flag service. No action is needed.',
      severity: 'info',
      timestamp: new Date().toISOString(),
    };
    if (channel.config.type === 'email') {
      const confirmed = (await this.deps.store.confirmedRecipients(this.deps.sql, [channel.id])).get(channel.id);
      if (!confirmed?.size) return { ok: false, status: 'skipped', deliveryId: null, statusCode: null, error: 'no confirmed recipient yet', durationMs: null };
      await this.deps.sends.consume(user.id, [...confirmed].map((email) => ({ id: email, shown: email })));
      await this.sendMail(channel, alert);
      return { ok: true, status: 'queued', deliveryId: null, statusCode: null, error: null, durationMs: null };
    }
    await this.deps.sends.consume(user.id, [httpRecipient(channel.config.url)]);
    const { deliveryId } = await this.deps.queue.enqueue({
      target: { kind: 'alert_channel', channelId },
      event: alert.kind,
      eventId: alert.id,
      body: alertBody(channel.config, alert),
      maxAttempts: 1,
    });
    const settled = await this.deps.queue.settle(deliveryId, this.deps.testSendWaitMs ?? 15_000);
    const [attempt] = (await this.deps.queue.store.attempts(this.deps.sql, [deliveryId])).get(deliveryId) ?? [];
    const status = settled?.status ?? 'pending';
    return {
      ok: status === 'delivered',
      status,
      deliveryId,
      statusCode: settled?.lastStatusCode ?? null,
      error: settled?.lastError ?? (status === 'pending' ? 'no answer yet; the attempt is still running' : null),
      durationMs: attempt?.durationMs ?? null,
    };
  }

  /**
   * Notifies every enabled channel of the organization (release safety calls this after a
   * rollback). Idempotent per (channel, alert id). Returns the channels notified.
   */
  readonly notifyOrgAlertChannels = async (orgId: string, alert: OrgAlert): Promise<NotifiedChannel[]> => {
    const channels = await this.deps.store.listByOrg(this.deps.sql, orgId, { enabledOnly: true });
    const http: NewDelivery[] = [];
    for (const channel of channels) {
      if (channel.config.type === 'email') await this.sendMail(channel, alert);
      else {
        http.push({
          target: { kind: 'alert_channel', channelId: channel.id },
          event: alert.kind,
          eventId: alert.id,
          flagKey: alert.flagKey ?? null,
          body: alertBody(channel.config, alert),
        });
      }
    }
    // The HTTP channels' deliveries in one statement, their workflows started concurrently.
    await this.deps.queue.enqueueMany(http);
    return channels.map((channel) => ({ id: channel.id, name: channel.name, type: channel.type }));
  };

  /** Mails confirmed recipients only; the key keeps each address's position in the config. */
  private async sendMail(channel: AlertChannelWithConfig, alert: OrgAlert) {
    if (channel.config.type !== 'email') return;
    const confirmed = (await this.deps.store.confirmedRecipients(this.deps.sql, [channel.id])).get(channel.id);
    for (const [i, to] of channel.config.recipients.entries()) {
      if (!confirmed?.has(to)) continue;
      // The same alert again (a retried notify) finds its mail already on its way.
      await this.deps.mail.send(alertMail(alert, to), `alert-${channel.id}-${alert.id}-${i}`);
    }
  }

  private confirmationMail(channel: AlertChannelWithConfig, by: UserRecord, to: string, token: string) {
    return {
      to,
      subject: `Confirm alert e-mails for "${channel.name}"`,
      text:
        `${by.name} (${by.email}) added this address to the alert channel "${channel.name}" of the feature flag service.\n\n` +
        `Alerts are e-mailed here only once you confirm: open ${this.deps.publicBaseUrl}/alert-channels/confirm?token=${token}\n` +
        `(or POST the token to /api/alert-channels/recipients/confirm). If you did not expect this, ignore this mail.`,
      token,
    };
  }

  private async configFrom(input: AlertChannelInput): Promise<AlertChannelConfig> {
    switch (input.type) {
      case 'chat':
        return { type: 'chat', url: await this.checkUrl(input.url) };
      case 'paging':
        return { type: 'paging', url: await this.checkUrl(input.url ?? DEFAULT_PAGING_URL), routingKey: input.routingKey };
      case 'email':
        return { type: 'email', recipients: [...new Set(input.recipients.map((r) => r.toLowerCase()))] };
      case 'webhook':
        return { type: 'webhook', url: await this.checkUrl(input.url), secret: input.secret ?? generateWebhookSecret() };
    }
  }

  private async checkUrl(raw: string): Promise<string> {
    try {
      await this.deps.outbound.assertAllowedUrl(raw);
      return raw;
    } catch (error) {
      if (error instanceof OutboundTargetError) throw badRequest(`Invalid url: ${error.message}`, [{ path: 'body.url', message: error.message }]);
      throw error;
    }
  }
}
