import { TableWriter, quoted, tsv, tsvTime, type TableFormat, type TableWriterOptions, type TableWriterStats } from '../../../analytics/writer';
import { boundedMemo, sha256Hex } from '../../infra/ids';
import { isInternedResult, perInternedResult, type EvaluationResult, type RolloutSide } from './engine/index';

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
  /** Distinct requests held at once; reaching it closes the folding window early. */
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
/** Rows a closed window hands to the writer per event-loop turn (whole requests: at least one). */
const SEALED_ROWS_PER_TURN = 2_000;

/** Which buffered events DELETE /api/evaluations removes before they are written. */
export interface DiscardFilter {
  projectIds: ReadonlySet<string>;
  serviceId?: string;
  flagKey: string;
}

/**
 * A line per request (analytics/schema/034): the request's fields, then `results`, a string per
 * flag, which ClickHouse's view turns into an evaluation_events row each.
 */
const COLUMNS: [string, ...string[]] = [
  'timestamp', 'project_id', 'service_id', 'environment', 'latency_ms', 'evaluations', 'targeting_key_hash', 'source', 'results',
];
/** Where project_id, service_id and results are in a line (DELETE /api/evaluations reads them). */
const PROJECT_COLUMN = COLUMNS.indexOf('project_id');
const SERVICE_COLUMN = COLUMNS.indexOf('service_id');
const RESULTS_COLUMN = COLUMNS.indexOf('results');
const BETWEEN_RESULTS = Buffer.from(',');
const END_OF_LINE = Buffer.from(']\n');
/** Between a result's fields, and the escape of the two separators inside one (analytics/schema/034). */
const FIELD_SEPARATOR = '\x1f';
const FIELD_ESCAPE = '\x1e';

/** A field of a result's string: \x1e and \x1f written as \x1e0 and \x1e1, which the view reverses. */
function field(text: string): string {
  // The escape first: the escapes this makes are followed by 0, never read as the separator's.
  return text.includes(FIELD_ESCAPE) || text.includes(FIELD_SEPARATOR) ? text.replaceAll(FIELD_ESCAPE, '\x1e0').replaceAll(FIELD_SEPARATOR, '\x1e1') : text;
}

/** timestamp to source, and the opening of `results`: the same for every flag of a (folded) request. */
function requestFields(timestamp: number, projectId: string, serviceId: string, environment: string, latencyMs: number, evaluations: number, targetingKeyHash: string, source: EvaluationSource): string {
  return `${tsvTime(timestamp)}\t${tsv(projectId)}\t${tsv(serviceId)}\t${tsv(environment)}\t${latencyMs}\t${evaluations}\t${targetingKeyHash}\t${source}\t[`;
}

/** A result's element of `results`: flag_key to rollout_side in one quoted string (the value as JSON, whose control characters are escaped). */
function resultFields(flagKey: string, reason: string, variant: string | undefined, value: unknown, errorCode: string | undefined, ruleId: string | undefined, rolloutSide: RolloutSide | undefined): string {
  return quoted(
    [field(flagKey), field(reason), field(variant ?? ''), value === undefined ? 'null' : JSON.stringify(value), field(errorCode ?? ''), field(ruleId ?? ''), rolloutSide ?? ''].join(
      FIELD_SEPARATOR,
    ),
  );
}

/** The line of one event (a request of one flag); a targeting key seen again is not hashed again (keys repeat across flags). */
function evaluationEventsFormat(): TableFormat<EvaluationEvent> {
  const hash = boundedMemo(hashTargetingKey, HASHES_KEPT);
  return {
    table: 'evaluation_requests',
    stores: 'evaluation_events',
    columns: COLUMNS,
    line: (e) =>
      requestFields(e.timestamp, e.projectId, e.serviceId, e.environment, e.latencyMs, e.evaluations ?? 1, e.targetingKey ? hash(e.targetingKey) : '', e.source) +
      resultFields(e.flagKey, e.reason, e.variant, e.value, e.errorCode, e.ruleId, e.rolloutSide) +
      ']\n',
  };
}

/**
 * A result's part of the folding key and of the line (as UTF-8 bytes), made once per interned
 * result (engine/evaluate.ts): its key part is a number, so a request's key grows by a few
 * characters per flag, not by the flag's whole description. A result that is not interned (an
 * error carrying the caller's default) is described in full each time.
 */
let nextResultId = 0;
const resultPart = perInternedResult((r) => ({
  id: isInternedResult(r) ? `${++nextResultId},` : describe(r),
  bytes: Buffer.from(resultFields(r.flagKey, r.reason, r.variant, r.value, r.errorCode, r.rolloutRuleId ?? r.ruleId, r.rolloutSide), 'utf8'),
}));

/** The value may be a caller's default, so it is JSON (its control characters escaped). */
function describe(r: EvaluationResult): string {
  return `\u0002${r.flagKey}\u0003${r.reason}\u0003${r.variant ?? ''}\u0003${valueKey(r.value)}\u0003${r.errorCode ?? ''}\u0003${r.rolloutRuleId ?? r.ruleId ?? ''}\u0003${r.rolloutSide ?? ''}\u0002`;
}

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
  /**
   * The folding window's requests by targeting key ('' for none). A key's first request is held
   * as itself, so a new user costs one map entry and no key string (what the window holds
   * outlives a young-generation collection, and is then copied); a later request of that key
   * that is not alike turns the entry into a map of that key's requests by `alikeKey`.
   */
  private window = new Map<string, EvaluationRequest | Map<string, EvaluationRequest>>();
  /** Distinct requests in the window, and the rows they will become. */
  private held = 0;
  private windowRows = 0;
  /** How many requests alike were folded onto a held one (only those folded onto), until it is written. */
  private readonly foldedOnto = new Map<EvaluationRequest, number>();
  private readonly maxGroups: number;
  private readonly foldMs: number;
  private sealTimer: NodeJS.Timeout | undefined;
  /** Requests of closed windows not handed to the writer yet, from `nextSealed` on. */
  private sealed: EvaluationRequest[] = [];
  private nextSealed = 0;
  private sealedRows = 0;
  private writeScheduled = false;
  private requests = 0;
  private folded = 0;
  /** The parts of the line being written, reused from request to request. */
  private readonly lineParts: Buffer[] = [];

  constructor(opts: RecorderOptions) {
    super(evaluationEventsFormat(), opts);
    this.maxGroups = opts.maxGroups ?? DEFAULT_MAX_GROUPS;
    this.foldMs = opts.foldMs ?? DEFAULT_FOLD_MS;
  }

  /** Never blocks and never throws; the request's results must not change afterwards. */
  recordRequest(request: EvaluationRequest): void {
    if (request.results.length === 0) return;
    this.requests++;
    const targetingKey = request.targetingKey ?? '';
    const held = this.window.get(targetingKey);
    if (held === undefined) {
      this.window.set(targetingKey, request);
      return this.hold(request);
    }
    if (!(held instanceof Map)) {
      if (alike(held, request)) return this.fold(held);
      this.window.set(targetingKey, new Map([[alikeKey(held), held], [alikeKey(request), request]]));
      return this.hold(request);
    }
    const key = alikeKey(request);
    const first = held.get(key);
    if (first !== undefined) return this.fold(first);
    held.set(key, request);
    this.hold(request);
  }

  private hold(request: EvaluationRequest): void {
    this.held++;
    this.windowRows += request.results.length;
    if (this.held >= this.maxGroups) this.seal();
    else if (this.sealTimer === undefined) this.sealTimer = setTimeout(this.sealOnTime, this.foldMs).unref();
  }

  private fold(first: EvaluationRequest): void {
    this.foldedOnto.set(first, (this.foldedOnto.get(first) ?? 0) + 1);
  }

  override flush(): Promise<void> {
    this.sealNow();
    return super.flush();
  }

  override close(): Promise<void> {
    this.sealNow();
    return super.close();
  }

  override stats(): RecorderStats {
    const stats = super.stats();
    return { ...stats, buffered: stats.buffered + this.windowRows + this.sealedRows, requests: this.requests, folded: this.folded };
  }

  /** Forgets buffered events of a flag that are not written yet (DELETE /api/evaluations). */
  discard(filter: DiscardFilter): void {
    this.sealNow();
    const projects = new Set([...filter.projectIds].map(tsv));
    const service = filter.serviceId === undefined ? undefined : tsv(filter.serviceId);
    // A result's element starts with its quoted flag key and the separator (the closing quote left out).
    const flagElement = quoted(field(filter.flagKey) + FIELD_SEPARATOR).slice(0, -1);
    this.rewriteLines((line) => {
      const fields = line.split('\t');
      const results = splitElements(fields[RESULTS_COLUMN]);
      if (!projects.has(fields[PROJECT_COLUMN]) || (service !== undefined && fields[SERVICE_COLUMN] !== service)) return { line, rows: results.length };
      const kept = results.filter((element) => !element.startsWith(flagElement));
      if (kept.length === 0) return undefined;
      fields[RESULTS_COLUMN] = `[${kept.join(',')}]`;
      return { line: fields.join('\t'), rows: kept.length };
    });
  }

  private readonly sealOnTime = () => {
    this.sealTimer = undefined;
    this.seal();
  };

  /**
   * Closes the folding window: its requests are handed to the writer a slice per event-loop
   * turn (writeSealed), so a window of many rows (thousands of new users, or demo batches of
   * 4,096 flags) never holds up the requests arriving meanwhile.
   */
  private seal(): void {
    clearTimeout(this.sealTimer);
    this.sealTimer = undefined;
    if (this.held === 0) return;
    for (const held of this.window.values()) {
      if (held instanceof Map) for (const request of held.values()) this.sealed.push(request);
      else this.sealed.push(held);
    }
    this.sealedRows += this.windowRows;
    this.window = new Map();
    this.held = 0;
    this.windowRows = 0;
    if (!this.writeScheduled) {
      this.writeScheduled = true;
      setImmediate(this.writeSealed);
    }
  }

  /** The window closed and every request in the writer now (a flush, a discard, close). */
  private sealNow(): void {
    this.seal();
    this.writeSealedRequests(Number.POSITIVE_INFINITY);
  }

  private readonly writeSealed = () => {
    this.writeScheduled = false;
    this.writeSealedRequests(SEALED_ROWS_PER_TURN);
    if (this.nextSealed < this.sealed.length) {
      this.writeScheduled = true;
      setImmediate(this.writeSealed);
    }
  };

  /** Hands sealed requests to the writer, a line each, until `rows` (flags) are written (whole requests). */
  private writeSealedRequests(rows: number): void {
    let written = 0;
    while (this.nextSealed < this.sealed.length && written < rows) {
      const first = this.sealed[this.nextSealed++];
      let evaluations = 1;
      const folded = this.foldedOnto.size === 0 ? undefined : this.foldedOnto.get(first);
      if (folded !== undefined) {
        evaluations += folded;
        this.foldedOnto.delete(first);
      }
      // Hashed once per request, for all its flags (a new user's key is seldom seen again within the window).
      const targetingKeyHash = first.targetingKey ? hashTargetingKey(first.targetingKey) : '';
      const latencyMs = Number(roundedLatency(first));
      const parts = this.lineParts;
      parts.push(Buffer.from(requestFields(first.timestamp, first.projectId, first.serviceId, first.environment, latencyMs, evaluations, targetingKeyHash, first.source), 'utf8'));
      const { results } = first;
      for (let i = 0; i < results.length; i++) {
        if (i > 0) parts.push(BETWEEN_RESULTS);
        parts.push(resultPart(results[i]).bytes);
      }
      parts.push(END_OF_LINE);
      this.recordBytes(parts, results.length);
      parts.length = 0;
      written += results.length;
    }
    this.folded += written;
    this.sealedRows -= written;
    if (this.nextSealed === this.sealed.length) {
      this.sealed = [];
      this.nextSealed = 0;
    }
  }
}

/** The elements of a `results` field, each as written (quoted: they may hold commas and escaped quotes). */
function splitElements(field: string): string[] {
  const elements: string[] = [];
  let start = 1;
  let inString = false;
  for (let i = 1; i < field.length - 1; i++) {
    const c = field[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === "'") inString = false;
    } else if (c === "'") inString = true;
    else if (c === ',') {
      elements.push(field.slice(start, i));
      start = i + 1;
    }
  }
  if (field.length > 2) elements.push(field.slice(start, field.length - 1));
  return elements;
}

/** Server latency to two significant digits: what folding compares and the row carries. */
function roundedLatency(request: EvaluationRequest): string {
  return request.latencyMs.toPrecision(2);
}

/**
 * What makes two requests of one targeting key alike: service, environment, protocol, latency,
 * and each result: the same interned result, or the same description of one that is not.
 */
function alike(a: EvaluationRequest, b: EvaluationRequest): boolean {
  if (a.serviceId !== b.serviceId || a.environment !== b.environment || a.source !== b.source || a.results.length !== b.results.length) return false;
  for (let i = 0; i < a.results.length; i++) {
    const x = a.results[i];
    const y = b.results[i];
    if (x !== y && (isInternedResult(x) || isInternedResult(y) || describe(x) !== describe(y))) return false;
  }
  return roundedLatency(a) === roundedLatency(b);
}

/** `alike` as a string, for a targeting key with requests that differ (equal exactly when alike). */
function alikeKey(request: EvaluationRequest): string {
  let key = `${request.serviceId}\u0001${request.environment}\u0001${request.source}\u0001${roundedLatency(request)}\u0001`;
  const { results } = request;
  for (let i = 0; i < results.length; i++) key += resultPart(results[i]).id;
  return key;
}

/** First 16 bytes of SHA-256 in hex: the documented, reproducible form stored in ClickHouse. */
export function hashTargetingKey(targetingKey: string): string {
  return sha256Hex(targetingKey).slice(0, 32);
}
