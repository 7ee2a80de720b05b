import type { MailMessage } from '../../../activities/mail';
import { signedHeaders } from '../webhooks/signing';
import type { AlertChannelConfig, AlertChannelWithConfig, OrgAlert } from './types';

/**
 * What each channel type receives. The body is built once when the alert is queued and sent
 * byte for byte on every attempt; headers (signatures, timestamps) are made per attempt.
 */

const SEVERITY_LABEL: Record<OrgAlert['severity'], string> = { critical: 'CRITICAL', error: 'ERROR', warning: 'WARNING', info: 'INFO' };

function scopeLine(alert: OrgAlert): string | null {
  const parts = [
    alert.flagKey && `flag ${alert.flagKey}`,
    alert.serviceId && `service ${alert.serviceId}`,
    alert.environment && `environment ${alert.environment}`,
    alert.projectId && `project ${alert.projectId}`,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : null;
}

function plainText(alert: OrgAlert): string {
  const lines = [alert.summary, scopeLine(alert)];
  for (const [k, v] of Object.entries(alert.details ?? {})) lines.push(`${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return lines.filter(Boolean).join('\n');
}

/** Slack-style incoming webhook: `{text}` is understood by Slack, Mattermost, Rocket.Chat, Teams workflows. */
export function chatBody(alert: OrgAlert): string {
  return JSON.stringify({ text: `*[${SEVERITY_LABEL[alert.severity]}] ${alert.title}*\n${plainText(alert)}` });
}

/** PagerDuty Events API v2 `trigger` event; the alert id is the dedup key. */
export function pagingBody(alert: OrgAlert, routingKey: string): string {
  return JSON.stringify({
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key: alert.id,
    payload: {
      summary: `${alert.title}: ${alert.summary}`.slice(0, 1024),
      source: alert.flagKey ? `flag:${alert.flagKey}` : 'feature-flag-service',
      severity: alert.severity,
      timestamp: alert.timestamp,
      component: alert.serviceId,
      group: alert.projectId,
      class: alert.kind,
      custom_details: { ...alert.details, environment: alert.environment, flagKey: alert.flagKey },
    },
  });
}

/** Generic webhook: the same envelope as flag webhooks, `{event, timestamp, data}`. */
export function genericWebhookBody(alert: OrgAlert): string {
  return JSON.stringify({ event: alert.kind === 'alert.test' ? 'alert.test' : 'alert.triggered', timestamp: alert.timestamp, data: alert });
}

export function alertBody(config: AlertChannelConfig, alert: OrgAlert): string {
  switch (config.type) {
    case 'chat':
      return chatBody(alert);
    case 'paging':
      return pagingBody(alert, config.routingKey);
    case 'webhook':
      return genericWebhookBody(alert);
    case 'email':
      throw new Error('e-mail channels are delivered through the mail queue');
  }
}

export function alertMail(alert: OrgAlert, to: string): MailMessage {
  return { to, subject: `[${SEVERITY_LABEL[alert.severity]}] ${alert.title}`, text: plainText(alert) };
}

/** URL and headers of one attempt to an HTTP channel. */
export function channelRequest(channel: AlertChannelWithConfig, deliveryId: string, body: string, nowSeconds: number): { url: string; headers: Record<string, string> } {
  const config = channel.config;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  switch (config.type) {
    case 'chat':
    case 'paging':
      return { url: config.url, headers };
    case 'webhook':
      return { url: config.url, headers: { ...headers, 'x-svc-event': 'alert', ...signedHeaders(config.secret, deliveryId, body, nowSeconds) } };
    case 'email':
      throw new Error('e-mail channels are delivered through the mail queue');
  }
}
