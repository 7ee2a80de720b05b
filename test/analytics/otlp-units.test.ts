import { create } from '@bufbuild/protobuf';
import { ExportTraceServiceRequestSchema } from '../../api/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { Span_SpanKind, Status_StatusCode } from '../../api/gen/opentelemetry/proto/trace/v1/trace_pb';
import { deriveFromTraces, OTLP_LIMITS, TraceJoin } from '../../api/features/analytics/otlp-outcomes';

/**
 * The trace join's bounds and the local-root rule (docs/opentelemetry.md#what-counts,
 * docs/limits.md#opentelemetry-ingestion), without a server: bounded in traces and in time.
 */

const tenant = { projectId: 'prj_1', serviceId: 'svc_1', environment: 'production' };
const NOW = Date.now();
const nanos = (ms: number) => BigInt(ms) * 1_000_000n;
const id = (n: number, bytes: number) => Buffer.from(n.toString(16).padStart(bytes * 2, '0'), 'hex');

const attrs = (list: Record<string, string>) => Object.entries(list).map(([key, v]) => ({ key, value: { value: { case: 'stringValue' as const, value: v } } }));

function request(
  spans: { trace: number; span: number; parent?: number; flags?: number; kind?: Span_SpanKind; error?: boolean; user?: string; evaluates?: string[]; name?: string; attributes?: Record<string, string> }[],
) {
  return create(ExportTraceServiceRequestSchema, {
    resourceSpans: [
      {
        scopeSpans: [
          {
            spans: spans.map((s) => ({
              traceId: id(s.trace, 16),
              spanId: id(s.span, 8),
              parentSpanId: s.parent === undefined ? new Uint8Array() : id(s.parent, 8),
              flags: s.flags ?? 0,
              name: s.name ?? 'work',
              attributes: attrs(s.attributes ?? {}),
              kind: s.kind ?? Span_SpanKind.INTERNAL,
              startTimeUnixNano: nanos(NOW - 20),
              endTimeUnixNano: nanos(NOW),
              status: { code: s.error ? Status_StatusCode.ERROR : Status_StatusCode.UNSET },
              events: s.user
                ? (s.evaluates ?? ['f']).map((flag) => ({ name: 'feature_flag.evaluation', timeUnixNano: nanos(NOW - 10), attributes: attrs({ 'feature_flag.key': flag, 'feature_flag.result.value': `${flag}-value`, 'feature_flag.context.id': s.user! }) }))
                : [],
            })),
          },
        ],
      },
    ],
  });
}

describe('local roots', () => {
  it('are spans without a parent, with a parent their flags mark remote, or (flags unknown) server and consumer spans', () => {
    const join = new TraceJoin();
    const cases = [
      { parent: undefined, flags: 0, kind: Span_SpanKind.INTERNAL, root: true },
      { parent: 9, flags: 0x300, kind: Span_SpanKind.INTERNAL, root: true },
      { parent: 9, flags: 0x100, kind: Span_SpanKind.SERVER, root: false },
      { parent: 9, flags: 0, kind: Span_SpanKind.SERVER, root: true },
      { parent: 9, flags: 0, kind: Span_SpanKind.CLIENT, root: false },
    ];
    cases.forEach((c, i) => {
      const derived = deriveFromTraces(request([{ trace: 100 + i, span: 1, parent: c.parent, flags: c.flags, kind: c.kind, error: true, user: 'u' }]), tenant, join, NOW);
      expect([i, derived.outcomes.map((o) => o.event)]).toEqual([i, c.root ? ['error', 'latency'] : []]);
      expect(derived.exposures).toHaveLength(1);
    });
  });
});

describe('evaluation spans', () => {
  it('count a span named feature_flag.evaluation (OpenFeature span hook) as an evaluation of its trace', () => {
    const req = request([
      { trace: 300, span: 1, error: true },
      { trace: 300, span: 2, parent: 1, flags: 0x100, name: 'feature_flag.evaluation', attributes: { 'feature_flag.key': 'f', 'feature_flag.result.variant': 'on', 'feature_flag.context.id': 'hook-user' } },
    ]);
    const derived = deriveFromTraces(req, tenant, new TraceJoin(), NOW);
    expect(derived.exposures.map((e) => [e.flagKey, e.variant, e.targetingKey])).toEqual([['f', 'on', 'hook-user']]);
    expect(derived.outcomes.map((o) => o.event)).toEqual(['error', 'latency']);
    // Without a request span around it, the evaluation span is an exposure and no outcome.
    const alone = deriveFromTraces(request([{ trace: 301, span: 1, error: true, name: 'feature_flag.evaluation', attributes: { 'feature_flag.key': 'f', 'feature_flag.result.variant': 'on', 'feature_flag.context.id': 'u' } }]), tenant, new TraceJoin(), NOW);
    expect([alone.exposures.length, alone.outcomes.length]).toEqual([1, 0]);
  });
});

describe('TraceJoin', () => {
  it('forgets a trace after its time, so a late root counts nothing', () => {
    const join = new TraceJoin({ traces: 10, ttlMs: 1_000 });
    deriveFromTraces(request([{ trace: 1, span: 2, parent: 1, flags: 0x100, user: 'u' }]), tenant, join, NOW);
    expect(deriveFromTraces(request([{ trace: 1, span: 1 }]), tenant, join, NOW + 500).outcomes).toHaveLength(1);
    deriveFromTraces(request([{ trace: 2, span: 2, parent: 1, flags: 0x100, user: 'u' }]), tenant, join, NOW);
    expect(deriveFromTraces(request([{ trace: 2, span: 1 }]), tenant, join, NOW + 1_001).outcomes).toHaveLength(0);
  });

  it('keeps at most its number of traces, the oldest going first', () => {
    const join = new TraceJoin({ traces: 3, ttlMs: 60_000 });
    for (let t = 1; t <= 4; t++) deriveFromTraces(request([{ trace: t, span: 2, parent: 1, flags: 0x100, user: `u${t}` }]), tenant, join, NOW);
    expect(join.size).toBe(3);
    expect(deriveFromTraces(request([{ trace: 1, span: 1 }]), tenant, join, NOW).outcomes).toHaveLength(0);
    expect(deriveFromTraces(request([{ trace: 4, span: 1 }]), tenant, join, NOW).outcomes).toHaveLength(1);
  });

  it('never joins the evaluations of one tenant to the root of another of the same trace id', () => {
    const join = new TraceJoin();
    deriveFromTraces(request([{ trace: 7, span: 2, parent: 1, flags: 0x100, user: 'u' }]), tenant, join, NOW);
    expect(deriveFromTraces(request([{ trace: 7, span: 1, error: true }]), { ...tenant, serviceId: 'svc_2' }, join, NOW).outcomes).toHaveLength(0);
  });

  it('takes back a refused request, so that its retry counts the same outcomes once', () => {
    const join = new TraceJoin();
    // Evaluations accepted earlier stay; the refused request's root and evaluations do not.
    deriveFromTraces(request([{ trace: 8, span: 2, parent: 1, flags: 0x100, user: 'early' }]), tenant, join, NOW);
    const body = request([
      { trace: 8, span: 3, parent: 1, flags: 0x100, user: 'late' },
      { trace: 8, span: 1, error: true },
      { trace: 9, span: 1, user: 'other' },
    ]);
    const refused = deriveFromTraces(body, tenant, join, NOW);
    expect(refused.outcomes.map((o) => o.event)).toEqual(['error', 'latency', 'error', 'latency', 'latency']);
    refused.rollback();
    const retried = deriveFromTraces(body, tenant, join, NOW);
    expect(retried.outcomes.map((o) => [o.event, o.flags])).toEqual(refused.outcomes.map((o) => [o.event, o.flags]));
    expect(deriveFromTraces(body, tenant, join, NOW).outcomes).toHaveLength(0);
  });

  it('keeps the first value of each context and flag, at most 100 flags per context', () => {
    const flags = Array.from({ length: 150 }, (_, i) => `flag-${i}`);
    const derived = deriveFromTraces(
      request([
        { trace: 11, span: 2, parent: 1, flags: 0x100, user: 'u', evaluates: flags.slice(0, 75) },
        { trace: 11, span: 4, parent: 1, flags: 0x100, user: 'u', evaluates: [...flags.slice(75), 'flag-0'] },
        { trace: 11, span: 3, parent: 1, flags: 0x100, user: 'v', evaluates: ['flag-0'] },
        { trace: 11, span: 1 },
      ]),
      tenant,
      new TraceJoin(),
      NOW,
    );
    expect(derived.exposures).toHaveLength(152);
    expect(derived.outcomes.map((o) => Object.keys(o.flags).length)).toEqual([100, 1]);
    expect(derived.outcomes[0].flags['flag-0']).toBe('"flag-0-value"');
  });

  it('rejects the spans past the per-request bound', () => {
    const spans = Array.from({ length: OTLP_LIMITS.recordsPerRequest + 2 }, (_, i) => ({ trace: 1, span: i + 1, parent: 99, flags: 0x100 }));
    const derived = deriveFromTraces(request(spans), tenant, new TraceJoin(), NOW);
    expect(derived.rejected).toBe(2);
    expect(derived.errorMessage).toBe(`more than ${OTLP_LIMITS.recordsPerRequest} spans in one request (and 1 more rejected)`);
  });
});
