import { LRUCache } from 'lru-cache';
import type { OutcomeRow } from '../../../analytics/rows';
import type { AnyValue, KeyValue } from '../../gen/opentelemetry/proto/common/v1/common_pb';
import type { ExportLogsServiceRequest } from '../../gen/opentelemetry/proto/collector/logs/v1/logs_service_pb';
import type { ExportTraceServiceRequest } from '../../gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { Span_SpanKind, Status_StatusCode, type Span } from '../../gen/opentelemetry/proto/trace/v1/trace_pb';
import { hashTargetingKey, type EvaluationEvent } from '../evaluation/recorder';
import { inWindow, MAX_FLAGS_PER_EVENT, newEventId } from './ingest-common';

/**
 * Exposures and outcomes derived from OTLP traces and logs (docs/opentelemetry.md#what-counts):
 * a flag evaluation event (span event or log record) is an exposure of its context to the value;
 * a trace's local root span is one `latency` outcome (and one `error` when its status is ERROR)
 * for every flag evaluated in the trace, attributed to the context that saw it.
 */

/** Bounds on what one request may hold and what is read of it (docs/limits.md#opentelemetry-ingestion). */
export const OTLP_LIMITS = {
  /** Spans or log records per request; the ones past it are rejected (partial success). */
  recordsPerRequest: 50_000,
  /** Span events read per span, and attributes read per event or log record (OpenTelemetry SDKs' own defaults). */
  eventsPerSpan: 128,
  attributesPerEvent: 128,
  flagKey: 256,
  variant: 256,
  contextId: 1024,
  /** The value as JSON text, as outcome events' `flags` keep it. */
  valueJson: 1024,
  /** Traces whose evaluations are kept for a root span that arrives in a later request, and for how long. */
  traces: 50_000,
  traceTtlMs: 120_000,
} as const;

/** Names of the flag evaluation event: the current one and the legacy one. */
const EVALUATION_EVENTS = new Set(['feature_flag.evaluation', 'feature_flag']);

/** Span flags bits 8 and 9: whether the parent's remoteness is known, and whether it is remote. */
const PARENT_REMOTE_KNOWN = 0x100;
const PARENT_REMOTE = 0x200;

const TRACE_ID_BYTES = 16;
const SPAN_ID_BYTES = 8;
const MAX_VALUE_DEPTH = 8;

export interface Tenant {
  projectId: string;
  serviceId: string;
  environment: string;
}

/** One flag evaluation read from an event: its context, flag and result. */
interface Evaluation {
  timestamp: number;
  flagKey: string;
  contextId: string;
  variant: string | undefined;
  /** The value, or undefined when only a variant was sent. */
  value: unknown;
  valueJson: string | undefined;
  reason: string;
  errorCode: string | undefined;
}

/** A trace's local root span: what it counts as outcomes. */
interface Root {
  spanId: string;
  timestamp: number;
  error: boolean;
  latencyMs: number;
}

export interface Derived {
  exposures: EvaluationEvent[];
  outcomes: OutcomeRow[];
  rejected: number;
  /** The first rejection's reason, and how many there were, for the partial success answer. */
  errorMessage: string;
  /** Forgets what this request added to the trace join: its rows were refused, so a retry must count them again. */
  rollback(): void;
}

/** An attribute value as JSON would hold it: int64 beyond 2^53 as text, bytes as base64. */
function plain(v: AnyValue | undefined, depth = 0): unknown {
  if (!v || depth > MAX_VALUE_DEPTH) return null;
  switch (v.value.case) {
    case 'stringValue':
    case 'boolValue':
    case 'doubleValue':
      return v.value.value;
    case 'intValue': {
      const n = v.value.value;
      return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n.toString();
    }
    case 'bytesValue':
      return Buffer.from(v.value.value).toString('base64');
    case 'arrayValue':
      return v.value.value.values.map((item) => plain(item, depth + 1));
    case 'kvlistValue':
      return Object.fromEntries(v.value.value.values.map((kv) => [kv.key, plain(kv.value, depth + 1)]));
    default:
      return null;
  }
}

/**
 * A flag's value as an evaluation event reports it. The OpenFeature hooks send an object value as
 * its JSON text: a string that reads as a JSON object or array is taken as that value.
 */
function flagValue(v: AnyValue | undefined): unknown {
  const value = plain(v);
  if (typeof value === 'string' && /^\s*[[{]/.test(value)) {
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return value;
    }
  }
  return value;
}

function text(v: AnyValue | undefined): string | undefined {
  if (!v) return undefined;
  if (v.value.case === 'stringValue') return v.value.value;
  if (v.value.case === 'intValue') return v.value.value.toString();
  return undefined;
}

/** The attributes an evaluation is read from, current names and deprecated ones. */
interface EvaluationAttributes {
  flagKey?: AnyValue;
  contextId?: AnyValue;
  variant?: AnyValue;
  legacyVariant?: AnyValue;
  value?: AnyValue;
  reason?: AnyValue;
  errorType?: AnyValue;
}

function evaluationAttributes(attributes: readonly KeyValue[]): EvaluationAttributes {
  const found: EvaluationAttributes = {};
  // The first of a repeated key counts, as the first of a JSON object's keys would.
  for (let i = 0; i < attributes.length && i < OTLP_LIMITS.attributesPerEvent; i++) {
    const { key, value } = attributes[i];
    switch (key) {
      case 'feature_flag.key':
        found.flagKey ??= value;
        break;
      case 'feature_flag.context.id':
        found.contextId ??= value;
        break;
      case 'feature_flag.result.variant':
        found.variant ??= value;
        break;
      case 'feature_flag.variant':
        found.legacyVariant ??= value;
        break;
      case 'feature_flag.result.value':
        found.value ??= value;
        break;
      case 'feature_flag.result.reason':
        found.reason ??= value;
        break;
      case 'error.type':
        found.errorType ??= value;
        break;
    }
  }
  return found;
}

/** The evaluation an event's attributes describe, undefined when it has no context id, or why it is unusable. */
function readEvaluation(attributes: readonly KeyValue[], timestamp: number): Evaluation | undefined | string {
  const at = evaluationAttributes(attributes);
  const flagKey = text(at.flagKey);
  if (!flagKey) return 'a flag evaluation event without feature_flag.key';
  if (flagKey.length > OTLP_LIMITS.flagKey) return `feature_flag.key is over ${OTLP_LIMITS.flagKey} characters`;
  const contextId = text(at.contextId);
  // Without a context the evaluation is nobody's exposure (docs/opentelemetry.md#what-counts).
  if (!contextId) return undefined;
  if (contextId.length > OTLP_LIMITS.contextId) return `feature_flag.context.id is over ${OTLP_LIMITS.contextId} characters`;
  const variant = text(at.variant ?? at.legacyVariant);
  if (variant !== undefined && variant.length > OTLP_LIMITS.variant) return `feature_flag.result.variant is over ${OTLP_LIMITS.variant} characters`;
  const value = at.value === undefined ? undefined : flagValue(at.value);
  const valueJson = value === undefined ? undefined : JSON.stringify(value);
  if (valueJson !== undefined && valueJson.length > OTLP_LIMITS.valueJson) return `feature_flag.result.value is over ${OTLP_LIMITS.valueJson} characters as JSON`;
  if (variant === undefined && value === undefined) return 'a flag evaluation event without feature_flag.result.variant or feature_flag.result.value';
  const reason = (text(at.reason) ?? 'unknown').slice(0, 64).toUpperCase();
  const errorType = text(at.errorType);
  return { timestamp, flagKey, contextId, variant, value, valueJson, reason, errorCode: errorType ? errorType.slice(0, 64).toUpperCase() : undefined };
}

/** Hex of an id, read in place. */
const hex = (id: Uint8Array) => Buffer.from(id.buffer, id.byteOffset, id.byteLength).toString('hex');

// Through a double: no BigInt is allocated, and what rounding loses (under a microsecond) is below a millisecond.
const nanosToMs = (nanos: bigint) => Math.floor(Number(nanos) / 1e6);

/** The span's own trace: its root within this service when the parent is absent or remote. */
function isLocalRoot(span: Span): boolean {
  if (span.parentSpanId.length === 0) return true;
  if (span.flags & PARENT_REMOTE_KNOWN) return (span.flags & PARENT_REMOTE) !== 0;
  // Exporters older than span flags do not say: a server or consumer span starts the service's part.
  return span.kind === Span_SpanKind.SERVER || span.kind === Span_SpanKind.CONSUMER;
}

interface TraceEntry {
  expires: number;
  /** The first evaluation of each context and flag: at most MAX_FLAGS_PER_EVENT contexts, and flags per context. */
  evaluations: Evaluation[];
  /** The flags of each context among the evaluations, once there are more than a scan should cover. */
  index: Map<string, Set<string>> | undefined;
  contexts: number;
  roots: Root[];
}

/** A root and the evaluations it newly counts for: its trace's, from `from` on. */
interface Attribution {
  root: Root;
  evaluations: readonly Evaluation[];
  from: number;
}

/** What one request added to one trace, so that it can be taken back. */
interface JoinStep {
  key: string;
  entry: TraceEntry;
  created: boolean;
  evaluations: number;
  roots: number;
}

/** Evaluations per trace read by a scan before an index is built. */
const SCANNED_EVALUATIONS = 16;

function indexOf(evaluations: readonly Evaluation[]): Map<string, Set<string>> {
  const index = new Map<string, Set<string>>();
  for (const e of evaluations) {
    let flags = index.get(e.contextId);
    if (!flags) index.set(e.contextId, (flags = new Set()));
    flags.add(e.flagKey);
  }
  return index;
}

/**
 * The evaluations of recent traces, so that a root span arriving in a later request than the
 * evaluations (exporters send spans as they end) still counts for them, and evaluations arriving
 * after their root still count its outcome. Bounded in traces and time; per process, so a trace's
 * spans reach one ingestion replica to be joined (docs/opentelemetry.md#sampling-and-batching).
 */
export class TraceJoin {
  // Least recently joined goes first: a plain Map's oldest-first eviction scans the holes its
  // deletions leave at its front, quadratic at this size (bench:otlp).
  private readonly traces: LRUCache<string, TraceEntry>;

  constructor(private readonly limits: { traces: number; ttlMs: number } = { traces: OTLP_LIMITS.traces, ttlMs: OTLP_LIMITS.traceTtlMs }) {
    this.traces = new LRUCache({ max: limits.traces });
  }

  get size(): number {
    return this.traces.size;
  }

  /** Adds a trace's evaluations and roots from one request (recorded in `steps`); answers what newly counts. */
  join(key: string, evaluations: readonly Evaluation[], roots: readonly Root[], now: number, steps: JoinStep[]): Attribution[] {
    let entry = this.traces.get(key);
    // Expired entries are dropped when met; the count bound evicts the ones never met again.
    const created = !entry || entry.expires <= now;
    if (!entry || created) {
      entry = { expires: now + this.limits.ttlMs, evaluations: [], index: undefined, contexts: 0, roots: [] };
      this.traces.set(key, entry);
    }
    steps.push({ key, entry, created, evaluations: entry.evaluations.length, roots: entry.roots.length });
    const known = entry.evaluations.length;
    for (const e of evaluations) admit(entry, e);
    const out: Attribution[] = [];
    // Roots seen before count for the evaluations new to this request only. The arrays handed
    // out are read before the next join changes them.
    if (entry.evaluations.length > known) for (const root of entry.roots) out.push({ root, evaluations: entry.evaluations, from: known });
    for (const root of roots) {
      if (entry.roots.some((r) => r.spanId === root.spanId)) continue;
      entry.roots.push(root);
      if (entry.evaluations.length) out.push({ root, evaluations: entry.evaluations, from: 0 });
    }
    return out;
  }

  /** Takes back the steps of a request whose rows were refused, newest first. */
  rollback(steps: readonly JoinStep[]): void {
    for (let i = steps.length - 1; i >= 0; i--) {
      const step = steps[i];
      if (step.created) {
        if (this.traces.peek(step.key) === step.entry) this.traces.delete(step.key);
        continue;
      }
      const { entry } = step;
      entry.evaluations.length = step.evaluations;
      entry.roots.length = step.roots;
      entry.contexts = new Set(entry.evaluations.map((e) => e.contextId)).size;
      entry.index = entry.evaluations.length > SCANNED_EVALUATIONS ? indexOf(entry.evaluations) : undefined;
    }
  }
}

/** Keeps a trace's first evaluation of each context and flag, within the per-event bounds. */
function admit(entry: TraceEntry, e: Evaluation): void {
  const list = entry.evaluations;
  let sameContext = 0;
  if (entry.index) {
    const flags = entry.index.get(e.contextId);
    if (flags?.has(e.flagKey)) return;
    sameContext = flags?.size ?? 0;
  } else {
    for (const x of list) {
      if (x.contextId !== e.contextId) continue;
      if (x.flagKey === e.flagKey) return;
      sameContext++;
    }
  }
  if (sameContext === 0 ? entry.contexts >= MAX_FLAGS_PER_EVENT : sameContext >= MAX_FLAGS_PER_EVENT) return;
  if (sameContext === 0) entry.contexts++;
  list.push(e);
  if (entry.index) {
    const flags = entry.index.get(e.contextId);
    if (flags) flags.add(e.flagKey);
    else entry.index.set(e.contextId, new Set([e.flagKey]));
  } else if (list.length > SCANNED_EVALUATIONS) entry.index = indexOf(list);
}

/** Collects one request's rows and rejections. */
class Collector {
  readonly exposures: EvaluationEvent[] = [];
  readonly outcomes: OutcomeRow[] = [];
  private readonly perTrace = new Map<string, { evaluations: Evaluation[]; roots: Root[] }>();
  rejected = 0;
  private firstProblem = '';

  constructor(
    private readonly tenant: Tenant,
    private readonly now: number,
  ) {}

  reject(problem: string): void {
    if (this.rejected++ === 0) this.firstProblem = problem;
  }

  /** Epoch ms of a record's time (now when it has none), or why it is outside the accepted window. */
  time(nanos: bigint): number | string {
    return inWindow(nanos === 0n ? undefined : nanosToMs(nanos), this.now);
  }

  trace(traceId: Uint8Array) {
    const key = hex(traceId);
    let t = this.perTrace.get(key);
    if (!t) this.perTrace.set(key, (t = { evaluations: [], roots: [] }));
    return t;
  }

  expose(e: Evaluation): void {
    const { projectId, serviceId, environment } = this.tenant;
    this.exposures.push({
      timestamp: e.timestamp,
      projectId,
      serviceId,
      environment,
      flagKey: e.flagKey,
      reason: e.reason,
      variant: e.variant,
      value: e.value,
      latencyMs: 0,
      errorCode: e.errorCode,
      ruleId: undefined,
      rolloutSide: undefined,
      targetingKey: e.contextId,
      source: 'otlp',
    });
  }

  finish(join: TraceJoin): Derived {
    const { projectId, serviceId, environment } = this.tenant;
    const prefix = `${projectId}\u0001${serviceId}\u0001${environment}\u0001`;
    const steps: JoinStep[] = [];
    for (const [traceId, t] of this.perTrace) {
      for (const { root, evaluations, from } of join.join(prefix + traceId, t.evaluations, t.roots, this.now, steps)) {
        for (const [contextId, flags] of flagsByContext(evaluations, from)) {
          const targetingKeyHash = hashTargetingKey(contextId);
          const outcome = (event: string, value: number | null): OutcomeRow => ({
            timestamp: root.timestamp, projectId, serviceId, environment, event, targetingKeyHash, value, flags, origin: 'otlp', eventId: newEventId(),
          });
          if (root.error) this.outcomes.push(outcome('error', null));
          this.outcomes.push(outcome('latency', root.latencyMs));
        }
      }
    }
    const errorMessage = this.rejected === 0 ? '' : this.rejected === 1 ? this.firstProblem : `${this.firstProblem} (and ${this.rejected - 1} more rejected)`;
    return { exposures: this.exposures, outcomes: this.outcomes, rejected: this.rejected, errorMessage, rollback: () => join.rollback(steps) };
  }
}

/**
 * Each context's flags with their values' JSON (a flag sent with only a variant has none), in
 * order of appearance, for the evaluations from `from` on.
 */
function flagsByContext(evaluations: readonly Evaluation[], from: number): [string, Record<string, string>][] {
  const out: [string, Record<string, string>][] = [];
  let current: [string, Record<string, string>] | undefined;
  for (let i = from; i < evaluations.length; i++) {
    const e = evaluations[i];
    // Most traces have one context: a scan of the few found so far beats a map.
    if (current?.[0] !== e.contextId) {
      current = out.find(([contextId]) => contextId === e.contextId);
      if (!current) out.push((current = [e.contextId, {}]));
    }
    if (e.valueJson !== undefined) current[1][e.flagKey] = e.valueJson;
  }
  return out;
}

/**
 * The evaluations a span carries, or why it is unusable: its flag evaluation events, and the span
 * itself when it is named as one (OpenFeature's span hook puts the attributes on a span of its own).
 */
function spanEvaluations(span: Span, c: Collector): Evaluation[] | string {
  const found: Evaluation[] = [];
  if (EVALUATION_EVENTS.has(span.name)) {
    const timestamp = c.time(span.endTimeUnixNano);
    if (typeof timestamp === 'string') return timestamp;
    const evaluation = readEvaluation(span.attributes, timestamp);
    if (typeof evaluation === 'string') return evaluation;
    if (evaluation) found.push(evaluation);
  }
  for (let i = 0; i < span.events.length && i < OTLP_LIMITS.eventsPerSpan; i++) {
    const event = span.events[i];
    if (!EVALUATION_EVENTS.has(event.name)) continue;
    const timestamp = c.time(event.timeUnixNano);
    if (typeof timestamp === 'string') return timestamp;
    const evaluation = readEvaluation(event.attributes, timestamp);
    if (typeof evaluation === 'string') return evaluation;
    if (evaluation) found.push(evaluation);
  }
  return found;
}

/** Exposures and outcomes of an ExportTraceServiceRequest. */
export function deriveFromTraces(request: ExportTraceServiceRequest, tenant: Tenant, join: TraceJoin, now: number): Derived {
  const c = new Collector(tenant, now);
  let seen = 0;
  for (const resource of request.resourceSpans) {
    for (const scope of resource.scopeSpans) {
      for (const span of scope.spans) {
        if (++seen > OTLP_LIMITS.recordsPerRequest) {
          c.reject(`more than ${OTLP_LIMITS.recordsPerRequest} spans in one request`);
          continue;
        }
        if (span.traceId.length !== TRACE_ID_BYTES || span.spanId.length !== SPAN_ID_BYTES) {
          c.reject('a span without a 16-byte trace id and an 8-byte span id');
          continue;
        }
        const evaluations = spanEvaluations(span, c);
        if (typeof evaluations === 'string') {
          c.reject(evaluations);
          continue;
        }
        let root: Root | undefined;
        // An evaluation's own span (the span hook's, without a request around it) times the evaluation, not a request.
        if (isLocalRoot(span) && !EVALUATION_EVENTS.has(span.name)) {
          const end = c.time(span.endTimeUnixNano);
          if (typeof end === 'string') {
            c.reject(end);
            continue;
          }
          if (span.endTimeUnixNano < span.startTimeUnixNano) {
            c.reject('a span that ends before it starts');
            continue;
          }
          const latencyMs = (Number(span.endTimeUnixNano) - Number(span.startTimeUnixNano)) / 1e6;
          root = { spanId: hex(span.spanId), timestamp: end, error: span.status?.code === Status_StatusCode.ERROR, latencyMs };
        }
        for (const e of evaluations) c.expose(e);
        if (evaluations.length === 0 && !root) continue;
        const t = c.trace(span.traceId);
        t.evaluations.push(...evaluations);
        if (root) t.roots.push(root);
      }
    }
  }
  return c.finish(join);
}

/** Exposures of an ExportLogsServiceRequest; those in a trace join its outcomes. */
export function deriveFromLogs(request: ExportLogsServiceRequest, tenant: Tenant, join: TraceJoin, now: number): Derived {
  const c = new Collector(tenant, now);
  let seen = 0;
  for (const resource of request.resourceLogs) {
    for (const scope of resource.scopeLogs) {
      for (const record of scope.logRecords) {
        if (++seen > OTLP_LIMITS.recordsPerRequest) {
          c.reject(`more than ${OTLP_LIMITS.recordsPerRequest} log records in one request`);
          continue;
        }
        const name = record.eventName || text(record.attributes.find((a) => a.key === 'event.name')?.value);
        if (!name || !EVALUATION_EVENTS.has(name)) continue;
        if (record.traceId.length !== 0 && record.traceId.length !== TRACE_ID_BYTES) {
          c.reject('a log record whose trace id is not 16 bytes');
          continue;
        }
        const timestamp = c.time(record.timeUnixNano || record.observedTimeUnixNano);
        if (typeof timestamp === 'string') {
          c.reject(timestamp);
          continue;
        }
        const evaluation = readEvaluation(record.attributes, timestamp);
        if (typeof evaluation === 'string') {
          c.reject(evaluation);
          continue;
        }
        if (!evaluation) continue;
        c.expose(evaluation);
        if (record.traceId.length) c.trace(record.traceId).evaluations.push(evaluation);
      }
    }
  }
  return c.finish(join);
}
