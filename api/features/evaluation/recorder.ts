import { TableWriter, tsv, tsvTime, type TableFormat, type TableWriterOptions, type TableWriterStats } from '../../../analytics/writer';
import { boundedMemo, sha256Hex } from '../../infra/ids';
import { perInternedResult, type EvaluationResult, type RolloutSide } from './engine/index';

/** The protocol an evaluation came by; 'otlp' for one an application reported through OpenTelemetry (docs/opentelemetry.md#what-counts). */
export type EvaluationSource = 'rest' | 'ofrep' | 'connect' | 'grpc-web' | 'flagd' | 'otlp';

/** One evaluation_events row: a flag's result, served `evaluations` times alike (1 when not given). */
export interface EvaluationEvent {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  reason: string;
  variant: string | undefined;
  value: unknown;
  latencyMs: number;
  errorCode: string | undefined;
  /** The rule that decided (analytics/schema/031): served it, or the caller fell outside its rollout. */
  ruleId: string | undefined;
  rolloutSide: RolloutSide | undefined;
  targetingKey: string | undefined;
  source: EvaluationSource;
  evaluations?: number;
}

/** One evaluation request as the request path hands it over: its facts and its results, nothing copied. */
export interface EvaluationRequest {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  source: EvaluationSource;
  targetingKey: string | undefined;
  latencyMs: number;
  results: readonly EvaluationResult[];
}

export type RecorderOptions = TableWriterOptions & {
  /** How long alike requests are folded together before they are handed to the writer as rows. */
  foldMs?: number;
  /** Distinct requests held at once; beyond it they are handed to the writer at once. */
  maxGroups?: number;
};
export type RecorderStats = TableWriterStats & {
  /** Requests recorded, and the rows they became after folding alike ones together. */
  requests: number;
  folded: number;
};

const HASHES_KEPT = 50_000;
/** EVAL_EVENTS_FOLD_MS's default (api/config.ts says why it is short). */
const DEFAULT_FOLD_MS = 250;
const DEFAULT_MAX_GROUPS = 20_000;

/** Which buffered events DELETE /api/evaluations removes before they are written. */
export interface DiscardFilter {
  projectIds: ReadonlySet<string>;
  serviceId?: string;
  flagKey: string;
}

/** Requests alike within the folding window: the first one stands for all, with their count. */
interface Group {
  first: EvaluationRequest;
  latencyMs: number;
  evaluations: number;
}

/** The evaluation_events line; a targeting key seen again is not hashed again (keys repeat across flags). */
function evaluationEventsFormat(): TableFormat<EvaluationEvent> {
  const hash = boundedMemo(hashTargetingKey, HASHES_KEPT);
  return {
    table: 'evaluation_events',
    columns: [
      'timestamp', 'project_id', 'service_id', 'environment', 'flag_key', 'reason', 'variant', 'value',
      'latency_ms', 'evaluations', 'error_code', 'rule_id', 'rollout_side', 'targeting_key_hash', 'source',
    ],
    line: (e) =>
      `${tsvTime(e.timestamp)}\t${tsv(e.projectId)}\t${tsv(e.serviceId)}\t${tsv(e.environment)}` +
      `\t${tsv(e.flagKey)}\t${tsv(e.reason)}\t${e.variant === undefined ? '' : tsv(e.variant)}` +
      `\t${e.value === undefined ? 'null' : tsv(JSON.stringify(e.value))}\t${e.latencyMs}\t${e.evaluations ?? 1}` +
      `\t${e.errorCode === undefined ? '' : tsv(e.errorCode)}\t${e.ruleId === undefined ? '' : tsv(e.ruleId)}\t${e.rolloutSide ?? ''}` +
      `\t${e.targetingKey ? hash(e.targetingKey) : ''}\t${e.source}\n`,
  };
}

/**
 * The evaluation event writer (docs/architecture.md#data-flow): the shared batched writer
 * (analytics/writer.ts) on `evaluation_events`, plus two things of its own.
 *
 * Requests alike are folded together for `foldMs` (`recordRequest`): same service,
 * environment, protocol, targeting key, server latency to two significant digits, and the same
 * result for every flag. They become one row per flag with their count in `evaluations`, stamped
 * with the first one's time. An SDK polling for its user, or a page loading all flags for each
 * view, costs a map lookup instead of a row per flag in ClickHouse; every exposure keeps its
 * targeting key and the value served (docs/api-reference.md#outcome-events, docs/canary.md), and
 * counts and latency percentiles stay exact to the folding (evaluation_minutes weighs latencies by
 * `evaluations`).
 *
 * And DELETE /api/evaluations: forgetting a flag's events not written yet.
 */
export class EvaluationRecorder extends TableWriter<EvaluationEvent> {
  private groups = new Map<string, Group>();
  /** Rows the folded requests will become. */
  private groupRows = 0;
  private readonly maxGroups: number;
  private readonly foldMs: number;
  private sealTimer: NodeJS.Timeout | undefined;
  private requests = 0;
  private folded = 0;

  constructor(opts: RecorderOptions) {
    super(evaluationEventsFormat(), opts);
    this.maxGroups = opts.maxGroups ?? DEFAULT_MAX_GROUPS;
    this.foldMs = opts.foldMs ?? DEFAULT_FOLD_MS;
  }

  /** Never blocks and never throws; the request's results must not change afterwards. */
  recordRequest(request: EvaluationRequest): void {
    if (request.results.length === 0) return;
    this.requests++;
    const latency = request.latencyMs.toPrecision(2);
    const key = groupKey(request, latency);
    const group = this.groups.get(key);
    if (group !== undefined) {
      group.evaluations++;
      return;
    }
    this.groups.set(key, { first: request, latencyMs: Number(latency), evaluations: 1 });
    this.groupRows += request.results.length;
    if (this.groups.size >= this.maxGroups) this.seal();
    else if (this.sealTimer === undefined) this.sealTimer = setTimeout(this.sealOnTime, this.foldMs).unref();
  }

  override flush(): Promise<void> {
    this.seal();
    return super.flush();
  }

  override close(): Promise<void> {
    this.seal();
    return super.close();
  }

  override stats(): RecorderStats {
    const stats = super.stats();
    return { ...stats, buffered: stats.buffered + this.groupRows, requests: this.requests, folded: this.folded };
  }

  /** Forgets buffered events of a flag that are not written yet (DELETE /api/evaluations). */
  discard(filter: DiscardFilter): void {
    this.seal();
    const projects = new Set([...filter.projectIds].map(tsv));
    const service = filter.serviceId === undefined ? undefined : tsv(filter.serviceId);
    const flag = tsv(filter.flagKey);
    this.discardLines((line) => {
      const [, project, serviceId, , flagKey] = line.split('\t', 5);
      return flagKey === flag && projects.has(project) && (service === undefined || serviceId === service);
    });
  }

  private readonly sealOnTime = () => {
    this.sealTimer = undefined;
    this.seal();
  };

  /** Hands the folded requests to the writer as rows, one per flag of each. */
  private seal(): void {
    clearTimeout(this.sealTimer);
    this.sealTimer = undefined;
    if (this.groups.size === 0) return;
    const groups = this.groups;
    this.groups = new Map();
    this.groupRows = 0;
    for (const { first, latencyMs, evaluations } of groups.values()) {
      for (const r of first.results) {
        this.folded++;
        this.record({
          timestamp: first.timestamp,
          projectId: first.projectId,
          serviceId: first.serviceId,
          environment: first.environment,
          flagKey: r.flagKey,
          reason: r.reason,
          variant: r.variant,
          value: r.value,
          latencyMs,
          evaluations,
          errorCode: r.errorCode,
          ruleId: r.rolloutRuleId ?? r.ruleId,
          rolloutSide: r.rolloutSide,
          targetingKey: first.targetingKey,
          source: first.source,
        });
      }
    }
  }
}

/**
 * What makes two requests alike. Flag keys, reasons, variants, rule ids and error codes come from
 * the flag definitions and the engine; the value may be a caller's default, so it is JSON (its
 * control characters escaped), and the targeting key goes last with its length, so no caller can
 * make two different requests read alike.
 */
function groupKey(request: EvaluationRequest, latency: string): string {
  let key = `${request.serviceId}\u0001${request.environment}\u0001${request.source}\u0001${latency}`;
  const { results } = request;
  for (let i = 0; i < results.length; i++) key += resultKey(results[i]);
  const targetingKey = request.targetingKey ?? '';
  return `${key}\u0001${targetingKey.length}:${targetingKey}`;
}

/** A result's part of the key: built once per interned result, not per request. */
const resultKey = perInternedResult(
  (r) =>
    `\u0001${r.flagKey}\u0002${r.reason}\u0002${r.variant ?? ''}\u0002${valueKey(r.value)}\u0002${r.errorCode ?? ''}\u0002${r.rolloutRuleId ?? r.ruleId ?? ''}\u0002${r.rolloutSide ?? ''}`,
);

function valueKey(value: unknown): string {
  switch (typeof value) {
    case 'boolean':
      return value ? 't' : 'f';
    case 'number':
      return String(value);
    case 'undefined':
      return 'u';
    default:
      return JSON.stringify(value);
  }
}

/** First 16 bytes of SHA-256 in hex: the documented, reproducible form stored in ClickHouse. */
export function hashTargetingKey(targetingKey: string): string {
  return sha256Hex(targetingKey).slice(0, 32);
}
