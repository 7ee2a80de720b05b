import { randomUUID } from 'node:crypto';
import type { Analytics } from '../../../analytics/client';
import { badRequest, HttpError } from '../../http/errors';
import { OutboundTargetError, type OutboundClient } from '../../http/outbound';
import type { Logger } from '../../infra/logger';
import type { DeliveryQueue } from '../webhooks/deliveries';
import { parseFlagValues, parseJsonOr, selectRows } from './queries/clickhouse';
import { rawInWindow, windowParams, type TimeWindow } from './queries/range';

/**
 * POST /api/analytics/export: a project's raw evaluation and outcome events of a period, sent to
 * a webhook in chunks, in order. Each chunk is an outbound delivery like a webhook event's (the
 * delivery lanes on Temporal: the webhook attempts and backoff of docs/limits.md, 10 s per attempt,
 * the SSRF guard at every attempt, X-Svc-Signature and Standard Webhooks headers when a signing
 * secret is given). The request waits for each chunk's outcome: a chunk not accepted stops the
 * export and the caller hears which data was delivered.
 */

export const EXPORT_DATA_TYPES = ['evaluations', 'outcomes'] as const;
export type ExportDataType = (typeof EXPORT_DATA_TYPES)[number];

/** At most this many rows per data type in one export; a bigger period is refused (413) before anything is sent. */
export const MAX_EXPORT_ROWS = 50_000;
/** Rows per POST: about 1-2 MB of JSON. */
export const EXPORT_CHUNK_ROWS = 5_000;
/** How long the request waits for one chunk: its 4 attempts (10 s each at most) and 7 s of backoff, with room. */
export const EXPORT_CHUNK_WAIT_MS = 60_000;
export const EXPORT_EVENT = 'analytics.export';

export interface ExportRequest {
  projectId: string;
  webhookUrl: string;
  signingSecret?: string;
  dataTypes: ExportDataType[];
  window: TimeWindow;
}

export type ExportCounts = Record<ExportDataType, number>;

const QUERIES: Record<ExportDataType, { count: string; rows: string }> = {
  evaluations: {
    count: `SELECT count() AS n FROM evaluation_events WHERE project_id = {projectId:String} AND ${rawInWindow('timestamp')}`,
    rows: `SELECT toUnixTimestamp64Milli(timestamp) AS ms, service_id, environment, flag_key, reason, variant, value, latency_ms,
                  evaluations, error_code, rule_id, rollout_side, targeting_key_hash, source
           FROM evaluation_events WHERE project_id = {projectId:String} AND ${rawInWindow('timestamp')}
           ORDER BY timestamp, service_id, flag_key LIMIT {limit:UInt32}`,
  },
  outcomes: {
    count: `SELECT count() AS n FROM outcome_events WHERE project_id = {projectId:String} AND ${rawInWindow('timestamp')}`,
    rows: `SELECT toUnixTimestamp64Milli(timestamp) AS ms, service_id, environment, event, targeting_key_hash, value, flags, origin, event_id
           FROM outcome_events WHERE project_id = {projectId:String} AND ${rawInWindow('timestamp')}
           ORDER BY timestamp, event_id LIMIT {limit:UInt32}`,
  },
};

type Row = Record<string, unknown> & { ms: string };

const toExported: Record<ExportDataType, (r: Row) => Record<string, unknown>> = {
  evaluations: (r) => ({
    timestamp: new Date(Number(r.ms)).toISOString(),
    serviceId: r.service_id,
    environment: r.environment,
    flagKey: r.flag_key,
    reason: r.reason,
    variant: r.variant,
    value: parseJsonOr(String(r.value), null),
    latencyMs: Number(r.latency_ms),
    evaluations: Number(r.evaluations),
    errorCode: r.error_code,
    ruleId: r.rule_id,
    rolloutSide: r.rollout_side,
    targetingKeyHash: r.targeting_key_hash,
    source: r.source,
  }),
  outcomes: (r) => ({
    timestamp: new Date(Number(r.ms)).toISOString(),
    serviceId: r.service_id,
    environment: r.environment,
    event: r.event,
    targetingKeyHash: r.targeting_key_hash,
    value: r.value === null ? null : Number(r.value),
    flags: parseFlagValues(r.flags as Record<string, string>),
    origin: r.origin,
    eventId: r.event_id,
  }),
};

export class AnalyticsExporter {
  constructor(private readonly deps: { analytics: Analytics; outbound: OutboundClient; deliveries: DeliveryQueue; logger: Logger }) {}

  async run(req: ExportRequest): Promise<ExportCounts> {
    await this.checkTarget(req.webhookUrl);
    const params = { projectId: req.projectId, ...windowParams(req.window), limit: MAX_EXPORT_ROWS };
    const sizes = await Promise.all(req.dataTypes.map(async (type) => [type, Number((await selectRows<{ n: string }>(this.deps.analytics, QUERIES[type].count, params))[0]?.n ?? 0)] as const));
    const tooBig = sizes.filter(([, n]) => n > MAX_EXPORT_ROWS);
    if (tooBig.length) {
      throw new HttpError(413, `The period holds more than ${MAX_EXPORT_ROWS} rows of ${tooBig.map(([t]) => t).join(' and ')}; export a shorter period or one data type at a time`, {
        code: 'EXPORT_TOO_LARGE',
        rows: Object.fromEntries(sizes),
        maxRows: MAX_EXPORT_ROWS,
      });
    }
    const exportId = `exp_${randomUUID()}`;
    const exported: ExportCounts = { evaluations: 0, outcomes: 0 };
    for (const type of req.dataTypes) {
      const rows = (await selectRows<Row>(this.deps.analytics, QUERIES[type].rows, params)).map(toExported[type]);
      // An empty data type sends nothing: `exported` says 0.
      const chunks = Math.ceil(rows.length / EXPORT_CHUNK_ROWS);
      for (let chunk = 0; chunk < chunks; chunk++) {
        const slice = rows.slice(chunk * EXPORT_CHUNK_ROWS, (chunk + 1) * EXPORT_CHUNK_ROWS);
        const body = JSON.stringify({
          event: EXPORT_EVENT,
          exportId,
          projectId: req.projectId,
          period: req.window.range,
          from: new Date(req.window.fromMs).toISOString(),
          to: new Date(req.window.toMs).toISOString(),
          dataType: type,
          chunk: chunk + 1,
          chunks,
          rows: slice,
        });
        const failure = await this.send(req, exportId, `${type}:${chunk + 1}`, body);
        if (failure) {
          this.deps.logger.warn({ exportId, projectId: req.projectId, dataType: type, chunk: chunk + 1, failure }, 'analytics export chunk not accepted');
          throw new HttpError(502, `The webhook did not accept ${type} chunk ${chunk + 1} of ${chunks}: ${failure}`, {
            code: 'EXPORT_DELIVERY_FAILED',
            ok: false,
            exported,
          });
        }
        exported[type] += slice.length;
      }
    }
    return exported;
  }

  /** The SSRF guard's verdict before any data is read: a refused target is the caller's mistake (400). */
  private async checkTarget(url: string): Promise<void> {
    try {
      await this.deps.outbound.assertAllowedUrl(url);
    } catch (error) {
      if (error instanceof OutboundTargetError) throw badRequest(`Invalid webhookUrl: ${error.message}`, [{ path: 'body.webhookUrl', message: error.message }]);
      throw error;
    }
  }

  /**
   * One chunk as a durable delivery to the given URL, in its export's lane (the webhook delivery
   * machinery: the docs/limits.md schedule, signing, SSRF guard at every attempt); waits for its
   * outcome. Null when accepted, else why not.
   */
  private async send(req: ExportRequest, exportId: string, chunkId: string, body: string): Promise<string | null> {
    const { deliveryId } = await this.deps.deliveries.enqueue({
      target: { kind: 'url', batchId: exportId, url: req.webhookUrl, secret: req.signingSecret ?? null },
      event: EXPORT_EVENT,
      eventId: chunkId,
      body,
    });
    const settled = await this.deps.deliveries.settle(deliveryId, EXPORT_CHUNK_WAIT_MS);
    if (settled?.status === 'delivered') return null;
    if (!settled || settled.status === 'pending') {
      throw new HttpError(504, `Chunk ${chunkId} of export ${exportId} is still being delivered; its remaining attempts continue`, { code: 'EXPORT_DELIVERY_PENDING', ok: false });
    }
    const attempts = settled.attemptCount > 1 ? ` (after ${settled.attemptCount} attempts)` : '';
    return `${settled.lastError ?? settled.status}${attempts}`;
  }
}
