import { Counter, Gauge, Histogram, Registry, type LabelValues } from 'prom-client';
import { HotCounter, HotHistogram, type CounterCell, type HistogramCell } from './hot';

/**
 * The process's Prometheus metrics (docs/operations.md#metrics), in one registry of its own
 * (never prom-client's global one, so several platforms in one process stay apart). The
 * counters and histograms written on request paths live here; the gauges that read state
 * other objects keep (snapshots, writer buffers, outbox backlog) are added with `gauge`, next
 * to that state, and read it at scrape time.
 *
 * Label values are fixed vocabularies (protocols, reasons, route templates, environment names,
 * table and consumer names): never a flag key, targeting key, token or user id.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly http: HttpMetrics;
  readonly evaluations: EvaluationMetrics;
  readonly streams: StreamMetrics;
  /** Seconds from a flag change's commit to this process's snapshot applying it. */
  readonly propagation: Histogram<never>;
  readonly canary: CanaryMetrics;

  constructor(build: { version: string; commit: string }) {
    const registers = [this.registry];
    new Gauge({ name: 'flagship_build_info', help: 'Always 1: the running version and commit', labelNames: ['version', 'commit'], registers }).set(
      { version: build.version, commit: build.commit },
      1,
    );
    this.http = new HttpMetrics(this.registry);
    this.evaluations = new EvaluationMetrics(this.registry);
    this.streams = new StreamMetrics(this.registry);
    this.propagation = new Histogram({
      name: 'flagship_change_propagation_seconds',
      help: 'Time from a flag change commit to this process serving it from its snapshot',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.canary = new CanaryMetrics(this.registry);
    this.watchProcess();
  }

  /**
   * CPU, memory and start time of the process. Not prom-client's default set: some of its names
   * fail `promtool check metrics`, and its event-loop monitor wakes the process 100 times a
   * second even when idle.
   */
  private watchProcess(): void {
    const startedAt = Date.now() / 1000 - process.uptime();
    this.counterOf({
      name: 'flagship_process_cpu_seconds_total',
      help: 'CPU time the process used (user and system)',
      labelNames: [],
      read: () => {
        const { user, system } = process.cpuUsage();
        return [[{}, (user + system) / 1e6]];
      },
    });
    this.gauge({ name: 'flagship_process_resident_memory_bytes', help: 'Resident memory of the process', collect: (set) => set({}, process.memoryUsage.rss()) });
    this.gauge({
      name: 'flagship_nodejs_heap_bytes',
      help: 'V8 heap, by state (used, total)',
      labelNames: ['state'],
      collect: (set) => {
        const { heapUsed, heapTotal } = process.memoryUsage();
        set({ state: 'used' }, heapUsed);
        set({ state: 'total' }, heapTotal);
      },
    });
    this.gauge({ name: 'flagship_process_start_time_seconds', help: 'When the process started, in seconds since the epoch', collect: (set) => set({}, startedAt) });
  }

  /** A gauge whose values are read from existing state when Prometheus scrapes. */
  gauge<L extends string>(config: { name: string; help: string; labelNames?: readonly L[]; collect: (set: (labels: LabelValues<L>, value: number) => void) => void | Promise<void> }): void {
    new Gauge<L>({
      name: config.name,
      help: config.help,
      labelNames: config.labelNames ?? [],
      registers: [this.registry],
      async collect() {
        // Values of labels that are gone (a dropped consumer) must not linger.
        this.reset();
        await config.collect((labels, value) => this.set(labels, value));
      },
    });
  }

  /**
   * A counter copied from a running total kept elsewhere (a writer's rows) at scrape time: it
   * only goes up, by the difference since the last scrape.
   */
  counterOf<L extends string>(config: { name: string; help: string; labelNames: readonly L[]; read: () => Iterable<[LabelValues<L>, number]> }): void {
    const seen = new Map<string, number>();
    new Counter<L>({
      name: config.name,
      help: config.help,
      labelNames: config.labelNames,
      registers: [this.registry],
      collect() {
        for (const [labels, total] of config.read()) {
          const key = JSON.stringify(labels);
          const before = seen.get(key) ?? 0;
          this.inc(labels, Math.max(0, total - before));
          seen.set(key, Math.max(before, total));
        }
      },
    });
  }
}

/** A counter's series, exposed at zero from now on. */
function zeroCounter<L extends string>(counter: Counter<L>, labels: LabelValues<L>): Counter.Internal {
  counter.inc(labels, 0);
  return counter.labels(labels);
}

/** The route label of a request no route declared (a 404, the console's static files). */
export const UNMATCHED_ROUTE = 'unmatched';

const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Requests by route template, method and status, and their duration: the Express chain's and the lean path's. */
export class HttpMetrics {
  private readonly requests: HotCounter;
  private readonly duration: HotHistogram;
  private readonly routes = new Map<string, RouteMetrics>();

  constructor(registry: Registry) {
    this.requests = new HotCounter(registry, 'flagship_http_requests_total', 'HTTP requests answered, by route template, method and status');
    this.duration = new HotHistogram(registry, 'flagship_http_request_duration_seconds', 'Time from a request arriving to its answer being sent, by route template and method', HTTP_BUCKETS);
  }

  /** The series of one route (its duration histogram exists at zero from now on). */
  route(method: string, template: string): RouteMetrics {
    const key = `${method} ${template}`;
    let route = this.routes.get(key);
    if (route === undefined) {
      route = new RouteMetrics(this.requests, this.duration.cell({ route: template, method }), method, template);
      this.routes.set(key, route);
    }
    return route;
  }
}

export class RouteMetrics {
  private readonly byStatus = new Map<number, CounterCell>();

  constructor(
    private readonly requests: HotCounter,
    private readonly duration: HistogramCell,
    private readonly method: string,
    private readonly template: string,
  ) {}

  /** One answered request: its status and the seconds it took. */
  observe(status: number, seconds: number): void {
    let counter = this.byStatus.get(status);
    if (counter === undefined) {
      counter = this.requests.cell({ route: this.template, method: this.method, status: String(status) });
      this.byStatus.set(status, counter);
    }
    counter.value++;
    this.duration.observe(seconds);
  }
}

/** The protocols an evaluation arrives by (EvaluationSource) and the engine's reasons and error codes. */
const EVALUATION_PROTOCOLS = ['rest', 'ofrep', 'connect', 'grpc-web', 'flagd', 'otlp'] as const;
const EVALUATION_REASONS = ['TARGETING_MATCH', 'DEFAULT', 'VARIANT'] as const;
const EVALUATION_ERRORS = ['FLAG_NOT_FOUND', 'TYPE_MISMATCH', 'PARSE_ERROR', 'TARGETING_KEY_MISSING', 'INVALID_CONTEXT', 'GENERAL'] as const;
type Protocol = (typeof EVALUATION_PROTOCOLS)[number];

/** The series of one protocol, bound at startup. */
interface ProtocolSeries {
  byReason: Record<string, CounterCell>;
  byError: Record<string, CounterCell>;
  duration: HistogramCell;
}

/** Flag evaluations by protocol, reason and error type, and evaluation request durations. */
export class EvaluationMetrics {
  private readonly series: Record<string, ProtocolSeries> = {};

  constructor(registry: Registry) {
    const evaluations = new HotCounter(registry, 'flagship_evaluations_total', 'Flag evaluations served, by protocol, reason and error type (none when it succeeded)');
    const duration = new HotHistogram(
      registry,
      'flagship_evaluation_duration_seconds',
      'Server time of one evaluation request (one or many flags), by protocol',
      [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    );
    for (const protocol of EVALUATION_PROTOCOLS) {
      const byReason: Record<string, CounterCell> = {};
      for (const reason of EVALUATION_REASONS) byReason[reason] = evaluations.cell({ protocol, reason, error_type: 'none' });
      const byError: Record<string, CounterCell> = {};
      for (const error of EVALUATION_ERRORS) byError[error] = evaluations.cell({ protocol, reason: 'ERROR', error_type: error });
      this.series[protocol] = { byReason, byError, duration: duration.cell({ protocol }) };
    }
  }

  /** One evaluation request's results and its server time. */
  observe(protocol: Protocol, results: readonly { reason: string; errorCode?: string }[], seconds: number): void {
    const series = this.series[protocol];
    for (let i = 0; i < results.length; i++) {
      const r = results[i];
      const cell = r.errorCode === undefined ? series.byReason[r.reason] : series.byError[r.errorCode];
      if (cell !== undefined) cell.value++;
    }
    series.duration.observe(seconds);
  }
}

/** Every kind of long-lived stream the data plane serves. */
export const STREAM_KINDS = ['sse', 'ofrep', 'connect', 'grpc-web', 'flagd', 'flagd_sync'] as const;
export type StreamKind = (typeof STREAM_KINDS)[number];
/**
 * Why a stream ended: the client went away, it was too slow to take its output, its credential
 * was revoked, the server shut down, or another server-side end (an error).
 */
export const DISCONNECT_REASONS = ['client', 'slow_client', 'revoked', 'shutdown', 'server'] as const;
export type DisconnectReason = (typeof DISCONNECT_REASONS)[number];

/** Open streams by kind and the ends of streams by reason. */
export class StreamMetrics {
  private readonly open: Record<string, Gauge.Internal<'kind'>> = {};
  private readonly ends: Record<string, Record<string, Counter.Internal>> = {};

  constructor(registry: Registry) {
    const open = new Gauge({ name: 'flagship_streams_open', help: 'Streams open now, by kind', labelNames: ['kind'], registers: [registry] });
    const disconnects = new Counter({
      name: 'flagship_stream_disconnects_total',
      help: 'Streams that ended, by kind and reason',
      labelNames: ['kind', 'reason'],
      registers: [registry],
    });
    for (const kind of STREAM_KINDS) {
      this.open[kind] = open.labels({ kind });
      this.open[kind].set(0);
      this.ends[kind] = {};
      for (const reason of DISCONNECT_REASONS) this.ends[kind][reason] = zeroCounter(disconnects, { kind, reason });
    }
  }

  opened(kind: StreamKind): void {
    this.open[kind].inc();
  }

  closed(kind: StreamKind, reason: DisconnectReason): void {
    this.open[kind].dec();
    this.ends[kind][reason].inc();
  }
}

export const CANARY_GATE_RESULTS = ['pass', 'fail', 'wait'] as const;
/** A rollback follows a failed gate, or an operator's abort. */
export const CANARY_ROLLBACK_REASONS = ['gate_failed', 'aborted'] as const;

/** Canary pipelines: stages applied, gate decisions, rollbacks. */
export class CanaryMetrics {
  readonly stageTransitions: Counter<never>;
  readonly gateDecisions: Counter<'result'>;
  readonly rollbacks: Counter<'reason'>;

  constructor(registry: Registry) {
    this.stageTransitions = new Counter({ name: 'flagship_canary_stage_transitions_total', help: 'Canary stages applied (the rollout moved to the next stage)', registers: [registry] });
    this.gateDecisions = new Counter({ name: 'flagship_canary_gate_decisions_total', help: 'Canary gate decisions, by result', labelNames: ['result'], registers: [registry] });
    for (const result of CANARY_GATE_RESULTS) this.gateDecisions.inc({ result }, 0);
    this.rollbacks = new Counter({ name: 'flagship_canary_rollbacks_total', help: 'Canary rollbacks, by reason', labelNames: ['reason'], registers: [registry] });
    for (const reason of CANARY_ROLLBACK_REASONS) this.rollbacks.inc({ reason }, 0);
  }
}
