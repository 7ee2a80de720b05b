/**
 * Organization alert channels (docs/api-reference.md#organizations): inherited by every project of
 * the organization.
 */

export const ALERT_CHANNEL_TYPES = ['chat', 'paging', 'email', 'webhook'] as const;
export type AlertChannelType = (typeof ALERT_CHANNEL_TYPES)[number];

/** Where a channel sends; stored as `config`, secrets included (never returned by the API). */
export type AlertChannelConfig =
  | { type: 'chat'; url: string }
  | { type: 'paging'; url: string; routingKey: string }
  | { type: 'email'; recipients: string[] }
  | { type: 'webhook'; url: string; secret: string };

export interface AlertChannelRecord {
  id: string;
  orgId: string;
  name: string;
  type: AlertChannelType;
  enabled: boolean;
  /** A readable summary of the destination with secrets masked. */
  destination: string;
  /** E-mail channels: each address and whether it confirmed (only confirmed ones are mailed). */
  recipients?: RecipientStatus[];
  createdBy: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface RecipientStatus {
  email: string;
  confirmed: boolean;
}

/** A stored channel with its full config: only the service and the delivery activity see this. */
export interface AlertChannelWithConfig extends AlertChannelRecord {
  config: AlertChannelConfig;
}

export const ALERT_SEVERITIES = ['critical', 'error', 'warning', 'info'] as const;
export type AlertSeverity = (typeof ALERT_SEVERITIES)[number];

/** What the release-safety work (guardrail rollback, canary abort …) reports to an organization. */
export interface OrgAlert {
  /** Idempotency key: notifying the same alert twice delivers once per channel. */
  id: string;
  /** Machine-readable kind, e.g. `guardrail.rollback` or `alert.test`. */
  kind: string;
  title: string;
  summary: string;
  severity: AlertSeverity;
  timestamp: string;
  projectId?: string;
  serviceId?: string;
  environment?: string;
  flagKey?: string;
  /** Free-form facts (metric values, thresholds, versions) shown to the responder. */
  details?: Record<string, unknown>;
}

export interface NotifiedChannel {
  id: string;
  name: string;
  type: AlertChannelType;
}

/** The hook release safety calls after a rollback; returns the channels that were notified. */
export type NotifyOrgAlertChannels = (orgId: string, alert: OrgAlert) => Promise<NotifiedChannel[]>;

/** The default for incident paging (PagerDuty Events API v2). */
export const DEFAULT_PAGING_URL = 'https://events.pagerduty.com/v2/enqueue';
