import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { actingUser, type Principal } from '../../auth/principal';
import { badRequest, forbidden, notFound, unauthorized } from '../../http/errors';
import { OutboundTargetError, type OutboundClient } from '../../http/outbound';
import { newId } from '../../infra/ids';
import type { Sql } from '../../infra/postgres';
import type { MailQueue } from '../mail/mail-queue';
import type { DeliveryQueue, DeliveryRecord } from '../webhooks/deliveries';
import { generateWebhookSecret } from '../webhooks/service';
import { alertBody, alertMail } from './payloads';
import type { AlertChannelStore, OrgRole } from './store';
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
  /** How long a test send waits for its single attempt (the attempt itself is bounded at 10 s). */
  testSendWaitMs?: number;
}

const MANAGING_ROLES: ReadonlySet<OrgRole> = new Set(['owner', 'admin']);

/** Drops the stored config: what the API may show. */
const publicView = ({ config: _config, ...record }: AlertChannelWithConfig): AlertChannelRecord => record;

/**
 * Organization alert channels: every member of the organization sees them (they apply to all
 * its projects); owners and admins create, delete and test them. Delivery of HTTP channels
 * runs through the same Temporal delivery workflow and SSRF guard as webhooks; e-mail goes
 * through the mail queue.
 */
export class AlertChannelService {
  constructor(private readonly deps: AlertChannelServiceDeps) {}

  async list(principal: Principal, orgId: string): Promise<AlertChannelRecord[]> {
    await this.requireOrgRole(principal, orgId, false);
    return (await this.deps.store.listByOrg(this.deps.sql, orgId)).map(publicView);
  }

  async create(principal: Principal, orgId: string, input: AlertChannelInput): Promise<AlertChannelRecord & { secret?: string }> {
    const userId = await this.requireOrgRole(principal, orgId, true);
    const config = await this.configFrom(input);
    const channel = await this.deps.store.insert(this.deps.sql, {
      id: newId('alc'),
      orgId,
      name: input.name,
      config,
      enabled: input.enabled ?? true,
      createdBy: userId,
    });
    // A generic webhook's signing secret is shown once, like a project webhook's.
    return config.type === 'webhook' ? { ...publicView(channel), secret: config.secret } : publicView(channel);
  }

  async remove(principal: Principal, orgId: string, channelId: string): Promise<void> {
    await this.requireOrgRole(principal, orgId, true);
    const channel = await this.deps.store.findById(this.deps.sql, channelId);
    if (!channel || channel.orgId !== orgId) throw notFound('Alert channel');
    await this.deps.store.remove(this.deps.sql, channelId);
  }

  /** Sends a test alert with a single attempt and reports what the destination answered. */
  async testSend(principal: Principal, orgId: string, channelId: string): Promise<TestSendResult> {
    await this.requireOrgRole(principal, orgId, true);
    const channel = await this.deps.store.findById(this.deps.sql, channelId);
    if (!channel || channel.orgId !== orgId) throw notFound('Alert channel');
    const alert: OrgAlert = {
      id: newId('alt'),
      kind: 'alert.test',
      title: `Test alert for channel "${channel.name}"`,
      summary: 'This is a test notification from the feature flag service. No action is needed.',
      severity: 'info',
      timestamp: new Date().toISOString(),
    };
    if (channel.config.type === 'email') {
      await this.sendMail(channel, alert);
      return { ok: true, status: 'queued', deliveryId: null, statusCode: null, error: null, durationMs: null };
    }
    const { deliveryId } = await this.deps.queue.enqueue({
      target: { kind: 'alert_channel', channelId },
      event: alert.kind,
      eventId: alert.id,
      body: alertBody(channel.config, alert),
      maxAttempts: 1,
    });
    const settled = await this.deps.queue.settle(deliveryId, this.deps.testSendWaitMs ?? 15_000);
    const [attempt] = (await this.deps.queue.store.attempts([deliveryId])).get(deliveryId) ?? [];
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
    const notified: NotifiedChannel[] = [];
    for (const channel of channels) {
      if (channel.config.type === 'email') await this.sendMail(channel, alert);
      else {
        await this.deps.queue.enqueue({
          target: { kind: 'alert_channel', channelId: channel.id },
          event: alert.kind,
          eventId: alert.id,
          flagKey: alert.flagKey ?? null,
          body: alertBody(channel.config, alert),
        });
      }
      notified.push({ id: channel.id, name: channel.name, type: channel.type });
    }
    return notified;
  };

  private async sendMail(channel: AlertChannelWithConfig, alert: OrgAlert) {
    if (channel.config.type !== 'email') return;
    for (const [i, to] of channel.config.recipients.entries()) {
      try {
        await this.deps.mail.send(alertMail(alert, to), `alert-${channel.id}-${alert.id}-${i}`);
      } catch (error) {
        // The same alert again (a retried notify): that mail is already on its way.
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      }
    }
  }

  /** The caller's user id after checking their organization role; 404 when not a member. */
  private async requireOrgRole(principal: Principal, orgId: string, manage: boolean): Promise<string> {
    if (principal.type === 'anonymous') throw unauthorized();
    const user = actingUser(principal);
    if (!user) throw forbidden('alert channels belong to an organization; use a signed-in session or a personal access token');
    const role = await this.deps.store.orgRoleOf(this.deps.sql, user.id, orgId);
    if (!role) throw notFound('Organization');
    if (manage && !MANAGING_ROLES.has(role)) throw forbidden('managing alert channels needs the owner or admin role in the organization');
    return user.id;
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
