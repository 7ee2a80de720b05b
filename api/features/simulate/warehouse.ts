import type { Analytics } from '../../../analytics/client';

/** One targeting key's latest stored context. */
export interface StoredContext {
  targetingKey: string;
  attributes: Record<string, unknown>;
}

interface Row {
  targeting_key: string;
  attributes: string;
}

/** Rows older than this are not read even before TTL removes them (TTL acts only when parts merge). */
const MAX_AGE_DAYS = 7;

/** The recent-contexts table (analytics/schema/032) as simulate reads it. */
export class RecentContextWarehouse {
  constructor(private readonly analytics: Analytics) {}

  /**
   * The latest attributes of up to `limit` distinct targeting keys of a service and
   * environment, most recently seen first. Several rows of a key (parts not merged yet, other
   * instances) collapse to the latest with argMax.
   */
  async latest(serviceId: string, environment: string, limit: number): Promise<StoredContext[]> {
    const result = await this.analytics.client.query({
      query: `SELECT targeting_key, argMax(attributes, seen_at) AS attributes, max(seen_at) AS last_seen
              FROM recent_contexts
              WHERE service_id = {serviceId:String} AND environment = {environment:String}
                AND seen_at >= now64(3) - toIntervalDay({maxAgeDays:UInt32})
              GROUP BY targeting_key
              ORDER BY last_seen DESC, targeting_key
              LIMIT {limit:UInt32}`,
      query_params: { serviceId, environment, limit, maxAgeDays: MAX_AGE_DAYS },
      format: 'JSONEachRow',
    });
    const rows = await result.json<Row>();
    return rows.map((row) => ({ targetingKey: row.targeting_key, attributes: parseAttributes(row.attributes) }));
  }
}

/** Stored text is always an object (attributes.ts writes it); anything else replays as no attributes. */
function parseAttributes(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
