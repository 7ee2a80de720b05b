import { EventEmitter } from 'node:events';
import type { IncomingMessage, Server } from 'node:http';
import { SpanKind, SpanStatusCode, context, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter as OTLPJsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OTLPProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { ExpressInstrumentation, ExpressLayerType } from '@opentelemetry/instrumentation-express';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { NodeSDK, resources, tracing as sdkTrace } from '@opentelemetry/sdk-node';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import postgres from 'postgres';
import type { Config } from '../config';
import type { Tracing } from './tracing';

/**
 * The OpenTelemetry SDK, loaded only when tracing is on (tracing.ts). What it traces and why
 * some instrumentations are left out: docs/operations.md#tracing.
 */
export function startTracingSdk(config: Config): Tracing {
  const resource = resources
    .defaultResource()
    .merge(resources.detectResources({ detectors: [resources.envDetector, resources.processDetector, resources.hostDetector] }))
    .merge(resources.resourceFromAttributes({ 'service.name': config.OTEL_SERVICE_NAME, 'flagship.roles': config.ROLES.join(',') }));
  const protocol = config.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? config.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  // Headers, timeout and compression come from the standard OTEL_EXPORTER_OTLP_* variables, read by the exporter.
  const exporter = protocol === 'http/json' ? new OTLPJsonTraceExporter({ url: config.tracesUrl }) : new OTLPProtobufTraceExporter({ url: config.tracesUrl });
  const spanProcessor = new sdkTrace.BatchSpanProcessor(exporter);
  const rootGate = requestRootGate(config);
  const sdk = new NodeSDK({
    resource,
    autoDetectResources: false,
    sampler: samplerOf(config),
    spanProcessors: [spanProcessor],
    // Traces only: metrics are Prometheus' (the management listener), logs go to stdout.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => isProbe(req) || !rootGate(req),
        startIncomingSpanHook: redactedPath,
        redactedQueryParams: REDACTED_QUERY_PARAMS,
        // Outgoing calls are traced only inside a traced operation (no root span per background poll).
        requireParentforOutgoingSpans: true,
      }),
      // Middleware layers would add a span each to every request; the route handler's is kept.
      new ExpressInstrumentation({ ignoreLayersType: [ExpressLayerType.MIDDLEWARE] }),
      // Command names only: keys carry token and user ids.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
    ],
  });
  sdk.start();
  tracePostgresQueries(trace.getTracer('flagship.postgres'));
  return {
    temporalClientInterceptors: [new OpenTelemetryWorkflowClientInterceptor()],
    workflowSpanProcessor: fromWorkflowSandbox(spanProcessor),
    resource,
    skipUntracedRequests(server) {
      type Emit = (this: Server, event: string | symbol, ...args: unknown[]) => boolean;
      const traced = server.emit as Emit;
      // What the http instrumentation wrapped (shimmer keeps it as __original): the plain emit.
      const plain = ((traced as { __original?: Emit }).__original ?? EventEmitter.prototype.emit) as Emit;
      server.emit = function (this: Server, event: string | symbol, ...args: unknown[]) {
        if (event === 'request' && !rootGate(args[0] as IncomingMessage)) return plain.call(this, event, ...args);
        return traced.call(this, event, ...args);
      } as Server['emit'];
    },
    shutdown: () => sdk.shutdown(),
  };
}

/**
 * The default sampler's decision for a request that arrives without a trace context, taken before
 * the http instrumentation does any work: building a span's attributes, binding the request's
 * events and starting a span that is then not sampled cost as much as the evaluation itself
 * (bench:eval). A request let through starts a sampled trace (samplerOf). Other samplers decide
 * on the span as usual.
 */
function requestRootGate(config: Config): (req: IncomingMessage) => boolean {
  if (config.OTEL_TRACES_SAMPLER !== 'parentbased_traceidratio') return () => true;
  const ratio = config.OTEL_TRACES_SAMPLER_ARG;
  return (req) => req.headers.traceparent !== undefined || Math.random() < ratio;
}

/** Under the default sampler, incoming requests without a trace context were sampled by requestRootGate already. */
class GatedRequestRoots implements sdkTrace.Sampler {
  constructor(private readonly others: sdkTrace.Sampler) {}
  shouldSample(...args: Parameters<sdkTrace.Sampler['shouldSample']>): sdkTrace.SamplingResult {
    const [, , , kind, attributes] = args;
    if (kind === SpanKind.SERVER && attributes['http.request.method'] !== undefined) return { decision: sdkTrace.SamplingDecision.RECORD_AND_SAMPLED };
    return this.others.shouldSample(...args);
  }
  toString() {
    return `GatedRequestRoots{${this.others.toString()}}`;
  }
}

function samplerOf(config: Config): sdkTrace.Sampler {
  const ratio = new sdkTrace.TraceIdRatioBasedSampler(config.OTEL_TRACES_SAMPLER_ARG);
  switch (config.OTEL_TRACES_SAMPLER) {
    case 'always_on':
      return new sdkTrace.AlwaysOnSampler();
    case 'always_off':
      return new sdkTrace.AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_on':
      return new sdkTrace.ParentBasedSampler({ root: new sdkTrace.AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new sdkTrace.ParentBasedSampler({ root: new sdkTrace.AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new sdkTrace.ParentBasedSampler({ root: new GatedRequestRoots(ratio) });
  }
}

/** Scrapes and probes of the management listener: polled every few seconds, never worth a trace. */
const PROBE_PATHS = new Set(['/metrics', '/livez', '/readyz']);
const isProbe = (req: IncomingMessage) => PROBE_PATHS.has((req.url ?? '').split('?')[0]);

/** Paths whose segment after the prefix is a secret (trigger URLs, invitation links). */
const SECRET_PATH = /^(\/api\/(?:triggers|invitations)\/)[^/?]+/;
const redactedPath = (req: IncomingMessage) => {
  const path = (req.url ?? '').split('?')[0];
  return SECRET_PATH.test(path) ? { 'url.path': path.replace(SECRET_PATH, '$1REDACTED') } : {};
};
/** Query parameters that carry credentials (the event-stream channel token, OAuth codes). */
const REDACTED_QUERY_PARAMS = ['token', 'channel', 'code', 'code_verifier', 'state', 'access_token', 'sig', 'signature'];

/** What the sandbox's serializer sends: a span of the 1.x SDK the workflow interceptors bundle. */
interface SandboxSpan extends sdkTrace.ReadableSpan {
  parentSpanId?: string;
  instrumentationLibrary?: sdkTrace.ReadableSpan['instrumentationScope'];
}

/**
 * Temporal's workflow interceptors build their spans with the 1.x SDK inside the sandbox; the
 * exporter here is 2.x, which reads the parent and the scope under other names. Without this
 * every workflow span would arrive as a root of its own, cut off from the request that started it.
 */
function fromWorkflowSandbox(processor: sdkTrace.SpanProcessor): sdkTrace.SpanProcessor {
  return {
    onStart: () => undefined,
    onEnd(span: SandboxSpan) {
      const parent = span.parentSpanContext ?? (span.parentSpanId ? { traceId: span.spanContext().traceId, spanId: span.parentSpanId, traceFlags: span.spanContext().traceFlags, isRemote: true } : undefined);
      const scope = span.instrumentationScope ?? span.instrumentationLibrary ?? { name: '@temporalio/interceptor-workflow' };
      processor.onEnd({ ...span, parentSpanContext: parent, instrumentationScope: scope });
    },
    forceFlush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
  };
}

/** postgres.js's query object as far as the wrapper reads it. */
interface PendingQuery {
  executed: boolean;
  tagged: boolean;
  strings: readonly string[] | string;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  handle(): Promise<void>;
}

/**
 * postgres.js has no OpenTelemetry instrumentation. Every query of every pool (and transaction)
 * is a `Query` whose `handle` sends it once, so wrapping that one method gives each query a
 * client span, ended when the query settles. Only inside a sampled trace: background loops
 * (outbox relay, reconciliation) would otherwise start a root span per poll. The prototype is
 * reached through a query of a client that never connects.
 */
function tracePostgresQueries(tracer: Tracer): void {
  const probe = postgres({ host: '127.0.0.1', max: 1 });
  const proto = Object.getPrototypeOf(probe`SELECT 1`) as PendingQuery;
  const handle = proto.handle;
  proto.handle = function tracedHandle(this: PendingQuery) {
    const parent = context.active();
    if (this.executed || !trace.getSpan(parent)?.isRecording()) return handle.call(this);
    const span = startQuerySpan(tracer, parent, this);
    const { resolve, reject } = this;
    this.resolve = (value) => {
      span.end();
      resolve(value);
    };
    this.reject = (error) => {
      span.setStatus({ code: SpanStatusCode.ERROR });
      // The SQLSTATE only: messages of constraint errors quote the values.
      span.setAttribute('error.type', (error as { code?: string }).code ?? 'error');
      span.end();
      reject(error);
    };
    return handle.call(this);
  };
}

const QUERY_TEXT_LIMIT = 2_048;

function startQuerySpan(tracer: Tracer, parent: Context, query: PendingQuery): Span {
  // Parameters stay out: the text has $n where the values were.
  const text = (typeof query.strings === 'string' ? query.strings : query.strings.reduce((sql, part, i) => `${sql}$${i}${part}`)).trim();
  const operation = /^[A-Za-z]+/.exec(text)?.[0].toUpperCase() ?? 'QUERY';
  return tracer.startSpan(
    `${operation} postgresql`,
    {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system.name': 'postgresql', 'db.operation.name': operation, 'db.query.text': text.slice(0, QUERY_TEXT_LIMIT) },
    },
    parent,
  );
}
