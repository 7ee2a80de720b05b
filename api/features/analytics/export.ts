import { randomUUID } from 'node:crypto';
import { classifyStatus } from '../../../activities/delivery';
import type { Analytics } from '../../../analytics/client';
import { DELIVERY_DELAYS_MS } from '../../../workflows/webhook-delivery';
import { badRequest, HttpError } from '../../http/errors';
import { OutboundRequestError, OutboundTargetError, type OutboundClient } from '../../http/outbound';
import type { Logger } from '../../infra/logger';
import { signedHeaders } from '../webhooks/signing';
import { parseFlagValues, parseJsonOr, selectRows } from './queries/clickhouse';
import { rawInWindow, windowParams, type TimeWindow } from './queries/range';

/**
 * POST /api/analytics/export: a project's raw evaluation and outcome events of a period, sent to
 * a webhook in chunks. Each chunk is delivered as webhook deliveries are: POSTs through the
 * OutboundClient (SSRF guard, address pinned, 10 s per attempt), signed when a signing secret is
 * given (X-Svc-Signature and Standard Webhooks headers, webhooks/signing.ts), answers judged by
 * classifyStatus and retried on the spec 8 schedule (DELIVERY_DELAYS_MS). The export is
 * synchronous: a chunk still not accepted stops it and the caller hears which data was
 * delivered; nothing is retried after the answer.
 */

export const EXPORT_DATA_TYPES = ['evaluations', 'outcomes'] as const;
export type ExportDataType = (typeof EXPORT_DATA_TYPES)[number];

/** At most this many rows per data type in one export; a bigger period is refused (413) before anything is sent. */
export const MAX_EXPORT_ROWS = 50_000;
/** Rows per POST: about 1-2 MB of JSON. */
export const EXPORT_CHUNK_ROWS = 5_000;
/** Spec 8: 10 s per delivery attempt. */
export const EXPORT_ATTEMPT_TIMEOUT_MS = 10_000;
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
                  error_code, rule_id, rollout_side, targeting_key_hash, source
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
  constructor(private readonly deps: { analytics: Analytics; outbound: OutboundClient; logger: Logger }) {}

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
        const failure = await this.send(req, `${exportId}:${type}:${chunk + 1}`, body);
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

  /** One chunk on the spec 8 schedule (at most 4 attempts, 0/1/2/4 s apart); null when accepted, else why not. */
  private async send(req: ExportRequest, deliveryId: string, body: string): Promise<string | null> {
    let lastError = '';
    for (const [index, delay] of DELIVERY_DELAYS_MS.entries()) {
      if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
      const headers: Record<string, string> = { 'content-type': 'application/json', 'x-svc-event': EXPORT_EVENT, 'x-svc-delivery-attempt': String(index + 1) };
      if (req.signingSecret) Object.assign(headers, signedHeaders(req.signingSecret, deliveryId, body, Math.floor(Date.now() / 1000)));
      try {
        const res = await this.deps.outbound.post(req.webhookUrl, { headers, body, timeoutMs: EXPORT_ATTEMPT_TIMEOUT_MS });
        const { outcome, error } = classifyStatus(res.status);
        if (outcome === 'delivered') return null;
        lastError = error ?? `HTTP ${res.status}`;
        if (outcome !== 'retry') return lastError;
      } catch (error) {
        if (!(error instanceof OutboundRequestError)) throw error;
        // Timeouts and network failures may pass; a refused (internal) target never will.
        if (error.kind === 'forbidden_target') return error.message;
        lastError = error.message;
      }
    }
    return `${lastError} (after ${DELIVERY_DELAYS_MS.length} attempts)`;
  }
}
