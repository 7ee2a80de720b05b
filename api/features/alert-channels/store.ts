import type { Queryable } from '../../infra/postgres';
import type { AlertChannelConfig, AlertChannelType, AlertChannelWithConfig } from './types';

interface ChannelRow {
  id: string;
  org_id: string;
  name: string;
  type: AlertChannelType;
  config: AlertChannelConfig;
  enabled: boolean;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

const lastFour = (s: string) => (s.length > 8 ? `…${s.slice(-4)}` : '…');

/** The destination without secrets: chat URLs and routing keys are credentials themselves. */
export function describeDestination(config: AlertChannelConfig): string {
  switch (config.type) {
    case 'chat': {
      const url = new URL(config.url);
      return `${url.origin}/${lastFour(url.pathname + url.search)}`;
    }
    case 'paging':
      return `${new URL(config.url).host} (routing key ${lastFour(config.routingKey)})`;
    case 'email':
      return config.recipients.join(', ');
    case 'webhook':
      return config.url;
  }
}

const toChannel = (r: ChannelRow): AlertChannelWithConfig => ({
  id: r.id,
  orgId: r.org_id,
  name: r.name,
  type: r.type,
  enabled: r.enabled,
  destination: describeDestination(r.config),
  createdBy: r.created_by,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  config: r.config,
});

export class AlertChannelStore {
  async insert(
    db: Queryable,
    c: { id: string; orgId: string; name: string; config: AlertChannelConfig; enabled: boolean; createdBy: string },
  ): Promise<AlertChannelWithConfig> {
    const [row] = await db<ChannelRow[]>`
      INSERT INTO alert_channels (id, org_id, name, type, config, enabled, created_by)
      VALUES (${c.id}, ${c.orgId}, ${c.name}, ${c.config.type}, ${db.json(c.config as never)}, ${c.enabled}, ${c.createdBy})
      RETURNING *`;
    return toChannel(row);
  }

  async findById(db: Queryable, id: string): Promise<AlertChannelWithConfig | null> {
    const [row] = await db<ChannelRow[]>`SELECT * FROM alert_channels WHERE id = ${id}`;
    return row ? toChannel(row) : null;
  }

  async listByOrg(db: Queryable, orgId: string, opts: { enabledOnly?: boolean } = {}): Promise<AlertChannelWithConfig[]> {
    const rows = opts.enabledOnly
      ? await db<ChannelRow[]>`SELECT * FROM alert_channels WHERE org_id = ${orgId} AND enabled ORDER BY created_at, id`
      : await db<ChannelRow[]>`SELECT * FROM alert_channels WHERE org_id = ${orgId} ORDER BY created_at, id`;
    return rows.map(toChannel);
  }

  async remove(db: Queryable, id: string): Promise<void> {
    await db`DELETE FROM alert_channels WHERE id = ${id}`;
  }

  async insertRecipients(db: Queryable, channelId: string, recipients: { email: string; tokenHash: string }[]): Promise<void> {
    for (const r of recipients) {
      await db`INSERT INTO alert_channel_recipients (channel_id, email, token_hash) VALUES (${channelId}, ${r.email}, ${r.tokenHash})`;
    }
  }

  /** The addresses of each channel that confirmed (only these are mailed). */
  async confirmedRecipients(db: Queryable, channelIds: string[]): Promise<Map<string, Set<string>>> {
    const byChannel = new Map<string, Set<string>>();
    if (!channelIds.length) return byChannel;
    const rows = await db<{ channel_id: string; email: string }[]>`
      SELECT channel_id, email FROM alert_channel_recipients
      WHERE channel_id = ANY(${channelIds}::text[]) AND confirmed_at IS NOT NULL`;
    for (const r of rows) byChannel.set(r.channel_id, (byChannel.get(r.channel_id) ?? new Set()).add(r.email));
    return byChannel;
  }

  /** Single use: null when the token is unknown or already confirmed its address. */
  async confirmRecipient(db: Queryable, tokenHash: string): Promise<{ channelId: string; email: string } | null> {
    const [row] = await db<{ channel_id: string; email: string }[]>`
      UPDATE alert_channel_recipients SET confirmed_at = now()
      WHERE token_hash = ${tokenHash} AND confirmed_at IS NULL
      RETURNING channel_id, email`;
    return row ? { channelId: row.channel_id, email: row.email } : null;
  }
}
