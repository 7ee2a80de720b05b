import { create, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { ExportLogsServiceRequestSchema, ExportLogsServiceResponseSchema } from '../../gen/opentelemetry/proto/collector/logs/v1/logs_service_pb';
import { ExportTraceServiceRequestSchema, ExportTraceServiceResponseSchema } from '../../gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import type { AnalyticsSink } from '../../../analytics/rows';
import type { Principal } from '../../auth/principal';
import { HttpError } from '../../http/errors';
import { HANDLED, defineRoute, type AnyRoute } from '../../http/route';
import { targetEnvironment, targetService } from '../evaluation/access';
import { evaluate } from '../evaluation/engine/index';
import type { EvaluationEvent } from '../evaluation/recorder';
import type { SnapshotStore } from '../evaluation/snapshots';
import { DEFAULT_ENVIRONMENT, isEnvironment } from '../evaluation/service';
import type { Environment } from '../../domain/environments';
import { serviceReader, type SdkIngestDeps } from './ingest-sdk';
import { decodeRequest, encodingOf, HEX_ID_FIELDS, OTLP_BODY_LIMIT, OtlpRefusal, readBody, sendMessage, sendRefusal, type OtlpEncoding } from './otlp-body';
import { deriveFromLogs, deriveFromTraces, TraceJoin, type Derived, type Tenant } from './otlp-outcomes';

/** Where exposures are written: the evaluation events writer, so every reader of evaluations counts them. */
export interface ExposureSink {
  record(event: EvaluationEvent): boolean;
  room(): number;
}

export interface OtlpIngestDeps extends SdkIngestDeps {
  evaluations: ExposureSink;
  /** The flags this process evaluates, to place exposures on a partial rollout; absent on ingest-only processes. */
  snapshots?: Pick<SnapshotStore, 'resolve'>;
}

/**
 * The service and environment an export is for: X-Service-Id and X-Environment, or a bound
 * token's own (naming another is refused as another service is; docs/opentelemetry.md#credentials).
 */
function otlpTarget(principal: Principal, serviceHeader: string | undefined, environmentHeader: string | undefined): { serviceId: string; environment: string } {
  const serviceId = targetService(principal, serviceHeader || undefined);
  if (!serviceId) throw new HttpError(400, 'The X-Service-Id header is required with a token not bound to a service');
  const named = environmentHeader || undefined;
  if (named !== undefined && !isEnvironment(named)) throw new HttpError(400, 'X-Environment must be development, staging or production');
  return { serviceId, environment: targetEnvironment(principal, named) ?? DEFAULT_ENVIRONMENT };
}

interface Signal<Req extends DescMessage, Res extends DescMessage> {
  path: string;
  summary: string;
  request: Req;
  response: Res;
  ids: (typeof HEX_ID_FIELDS)[keyof typeof HEX_ID_FIELDS];
  derive: (request: MessageShape<Req>, tenant: Tenant, join: TraceJoin, now: number) => Derived;
  /** The export response, with a partial success when some records were rejected. */
  answer: (derived: Derived) => MessageShape<Res>;
}

/**
 * OTLP/HTTP ingestion on the ingest listener (docs/opentelemetry.md): POST /v1/traces and /v1/logs,
 * protobuf or JSON, gzip as exporters send it, credentials and per-token limits as every SDK
 * route. Flag evaluations become exposures (evaluation events of source `otlp`), traces' local
 * roots `error` and `latency` outcome events (origin `otlp`), all through the one batched writer.
 */
export function otlpIngestRoutes(deps: OtlpIngestDeps, join = new TraceJoin()): AnyRoute[] {
  const route = <Req extends DescMessage, Res extends DescMessage>(signal: Signal<Req, Res>): AnyRoute =>
    defineRoute({
      method: 'post',
      path: signal.path,
      summary: signal.summary,
      tags: ['analytics'],
      auth: 'authenticated',
      sdk: true,
      access: {
        capability: 'flags:read',
        check: (principal, ctx) => {
          const { serviceId } = otlpTarget(principal, ctx.req.get('x-service-id'), ctx.req.get('x-environment'));
          return serviceReader(deps, principal, serviceId);
        },
      },
      bodyLimit: OTLP_BODY_LIMIT,
      async handler(ctx) {
        const { serviceId, environment } = otlpTarget(ctx.principal, ctx.req.get('x-service-id'), ctx.req.get('x-environment'));
        let encoding: OtlpEncoding | undefined;
        try {
          encoding = encodingOf(ctx.req.get('content-type'));
          const body = await readBody(ctx.req, ctx.res);
          const request = decodeRequest(signal.request, body, encoding, signal.ids);
          const flags = await rolloutFlags(deps.snapshots, serviceId, environment);
          // From here to the answer nothing awaits: the join sees requests one at a time, and a
          // request refused by the writer takes back what it added to the join.
          const derived = signal.derive(request, { projectId: ctx.granted[0].projectId, serviceId, environment }, join, Date.now());
          if (flags) placeOnRollouts(flags, derived.exposures);
          store(deps, derived);
          sendMessage(ctx.res, 200, signal.response, signal.answer(derived), encoding);
        } catch (error) {
          if (!(error instanceof OtlpRefusal)) throw error;
          sendRefusal(ctx.res, error, encoding);
        }
        return HANDLED;
      },
    });
  return [
    route({
      path: '/v1/traces',
      summary:
        'OTLP/HTTP trace export (protobuf or JSON, gzip): flag evaluation span events count as exposures, local root spans as error and latency outcomes of the flags their trace evaluated',
      request: ExportTraceServiceRequestSchema,
      response: ExportTraceServiceResponseSchema,
      ids: HEX_ID_FIELDS.traces,
      derive: deriveFromTraces,
      answer: (d) =>
        create(ExportTraceServiceResponseSchema, d.rejected ? { partialSuccess: { rejectedSpans: BigInt(d.rejected), errorMessage: d.errorMessage } } : {}),
    }),
    route({
      path: '/v1/logs',
      summary: 'OTLP/HTTP logs export (protobuf or JSON, gzip): flag evaluation log records count as exposures, joined to the outcomes of their trace',
      request: ExportLogsServiceRequestSchema,
      response: ExportLogsServiceResponseSchema,
      ids: HEX_ID_FIELDS.logs,
      derive: deriveFromLogs,
      answer: (d) =>
        create(ExportLogsServiceResponseSchema, d.rejected ? { partialSuccess: { rejectedLogRecords: BigInt(d.rejected), errorMessage: d.errorMessage } } : {}),
    }),
  ];
}

type EnvironmentFlags = NonNullable<Awaited<ReturnType<SnapshotStore['resolve']>>>['environments'][Environment];

/** The flags of the service's environment this process evaluates, to place exposures with. */
async function rolloutFlags(snapshots: OtlpIngestDeps['snapshots'], serviceId: string, environment: string): Promise<EnvironmentFlags | undefined> {
  if (!snapshots || !isEnvironment(environment)) return undefined;
  return (await snapshots.resolve(serviceId))?.environments[environment];
}

/**
 * Which side of a partial rollout each exposure is on, so canary gates count it
 * (docs/opentelemetry.md#what-counts): the flag evaluated here for the context id alone. Placed
 * only when that gives the value the application reported; otherwise the application's context
 * decided by attributes we do not have, and the exposure stays on no side.
 */
function placeOnRollouts(flags: EnvironmentFlags, exposures: EvaluationEvent[]): void {
  for (const exposure of exposures) {
    const compiled = flags.get(exposure.flagKey)?.compiled;
    if (!compiled || exposure.value === undefined || exposure.targetingKey === undefined) continue;
    const ours = evaluate(compiled, exposure.flagKey, { targetingKey: exposure.targetingKey }, undefined);
    if (ours.rolloutSide === undefined || JSON.stringify(ours.value) !== JSON.stringify(exposure.value)) continue;
    exposure.ruleId = ours.rolloutRuleId ?? ours.ruleId;
    exposure.rolloutSide = ours.rolloutSide;
  }
}

/**
 * Exposures and outcomes into the one writer, all of them or none: over its memory bound the
 * request is answered 503 with Retry-After and its trace join steps are taken back, so the
 * exporter's retry counts everything once.
 */
function store(deps: { evaluations: ExposureSink; sink: AnalyticsSink }, derived: Derived): void {
  if (deps.evaluations.room() < derived.exposures.length || deps.sink.room('outcome_events') < derived.outcomes.length) {
    derived.rollback();
    throw new HttpError(503, 'Analytics ingestion is over its memory bound; retry shortly', { retryAfter: 5 });
  }
  for (const exposure of derived.exposures) deps.evaluations.record(exposure);
  for (const row of derived.outcomes) deps.sink.record('outcome_events', row);
}
