import type { Analytics } from '../../../analytics/client';
import type { EvaluationRecorder } from './recorder';

export interface EvaluationLogFilter {
  projectIds: string[];
  serviceId?: string;
  flagKey?: string;
  since?: Date;
  limit: number;
}

export interface EvaluationLogEntry {
  timestamp: string;
  flagKey: string;
  serviceId: string;
  environment: string;
  reason: string;
  variant?: string;
  value: unknown;
  latencyMs: number;
  errorCode?: string;
  targetingKeyHash?: string;
  source: string;
}

interface Row {
  ms: string | number;
  flag_key: string;
  service_id: string;
  environment: string;
  reason: string;
  variant: string;
  value: string;
  latency_ms: number;
  error_code: string;
  targeting_key_hash: string;
  source: string;
}

const DELETE_TABLES = ['evaluation_events', 'evaluation_minutes'] as const;

/**
 * Reads and clears evaluation events in ClickHouse (GET and DELETE /api/evaluations): one entry
 * per evaluation, a folded row (recorder.ts) read as as many entries as it stands for. Both first
 * deal with this instance's unwritten buffer: a read flushes it (the caller sees its own
 * evaluations), a clear discards the matching buffered events so they cannot reappear.
 */
export class EvaluationLog {
  constructor(
    private readonly analytics: Analytics,
    private readonly recorder: EvaluationRecorder,
  ) {}

  async list(filter: EvaluationLogFilter): Promise<EvaluationLogEntry[]> {
    if (filter.projectIds.length === 0) return [];
    await this.recorder.flush();
    const where = ['project_id IN {projectIds:Array(String)}'];
    const params: Record<string, unknown> = { projectIds: filter.projectIds, limit: filter.limit };
    if (filter.serviceId !== undefined) {
      where.push('service_id = {serviceId:String}');
      params.serviceId = filter.serviceId;
    }
    if (filter.flagKey !== undefined) {
      where.push('flag_key = {flagKey:String}');
      params.flagKey = filter.flagKey;
    }
    if (filter.since !== undefined) {
      where.push('timestamp >= fromUnixTimestamp64Milli({sinceMs:Int64})');
      params.sinceMs = filter.since.getTime();
    }
    const rs = await this.analytics.client.query({
      query: `SELECT toUnixTimestamp64Milli(timestamp) AS ms, flag_key, service_id, environment, reason,
                     variant, value, latency_ms, error_code, targeting_key_hash, source
              FROM evaluation_events ARRAY JOIN range(least(evaluations, {limit:UInt32})) AS _
              WHERE ${where.join(' AND ')}
              ORDER BY timestamp DESC
              LIMIT {limit:UInt32}`,
      query_params: params,
      format: 'JSONEachRow',
    });
    const rows = (await rs.json()) as Row[];
    return rows.map(toEntry);
  }

  /** Deletes the matching events (raw and per-minute rollups); returns how many raw events went. */
  async clear(filter: { projectIds: string[]; serviceId?: string; flagKey: string }): Promise<number> {
    if (filter.projectIds.length === 0) return 0;
    const projects = new Set(filter.projectIds);
    this.recorder.discard({ projectIds: projects, serviceId: filter.serviceId, flagKey: filter.flagKey });
    await this.recorder.flush();
    const where = ['project_id IN {projectIds:Array(String)}', 'flag_key = {flagKey:String}'];
    const params: Record<string, unknown> = { projectIds: filter.projectIds, flagKey: filter.flagKey };
    if (filter.serviceId !== undefined) {
      where.push('service_id = {serviceId:String}');
      params.serviceId = filter.serviceId;
    }
    const rs = await this.analytics.client.query({
      query: `SELECT sum(evaluations) AS n FROM evaluation_events WHERE ${where.join(' AND ')}`,
      query_params: params,
      format: 'JSONEachRow',
    });
    const [row] = (await rs.json()) as { n: string | number }[];
    const count = Number(row?.n ?? 0);
    if (count > 0) {
      for (const table of DELETE_TABLES) {
        await this.analytics.client.command({ query: `DELETE FROM ${table} WHERE ${where.join(' AND ')}`, query_params: params });
      }
    }
    return count;
  }
}

function toEntry(r: Row): EvaluationLogEntry {
  const entry: EvaluationLogEntry = {
    timestamp: new Date(Number(r.ms)).toISOString(),
    flagKey: r.flag_key,
    serviceId: r.service_id,
    environment: r.environment,
    reason: r.reason,
    value: parse(r.value),
    latencyMs: Number(r.latency_ms),
    source: r.source,
  };
  if (r.variant) entry.variant = r.variant;
  if (r.error_code) entry.errorCode = r.error_code;
  if (r.targeting_key_hash) entry.targetingKeyHash = r.targeting_key_hash;
  return entry;
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
