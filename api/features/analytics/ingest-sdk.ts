import { z } from 'zod';
import type { AnalyticsSink, OutcomeRow } from '../../../analytics/rows';
import { decide, refusal, type ProjectGrant } from '../../auth/access';
import type { Principal, ProjectRole } from '../../auth/principal';
import { notFound, unauthorized } from '../../http/errors';
import { BODY_LIMITS, defineRoute, type AnyRoute } from '../../http/route';
import { targetEnvironment } from '../evaluation/access';
import { hashTargetingKey } from '../evaluation/recorder';
import { DEFAULT_ENVIRONMENT } from '../evaluation/service';
import { EnvironmentSchema, type Environment } from '../../domain/environments';
import { idSchema } from '../projects/common';
import { EventName, EventTime, FlagValues, inWindow, newEventId, parseItem, pending, recordAll, type ItemProblem, type PendingRow } from './ingest-common';
import type { IngestSites } from './ingest-sites';

/** At most 1,000 events and 256 KB per track request (docs/api-reference.md#outcome-events). */
export const TRACK_MAX_EVENTS = 1_000;

/** SDK telemetry bounds (docs/analytics-ingestion.md). */
export const TELEMETRY_LIMITS = { summaries: 1_000, webVitals: 500, errors: 100, message: 2_048, stack: 16_384, url: 2_048 } as const;

const Environment = EnvironmentSchema.optional().describe("Defaults to development as on evaluation, or to a bound token's environment");

const TrackEvent = z
  .object({
    event: EventName.describe("The event's name; `error` (one failure) and `latency` (value = milliseconds) are reserved"),
    targetingKey: z.string().min(1).max(1024),
    value: z.number().finite().nullable().optional(),
    timestamp: EventTime.optional().describe('ISO 8601 or epoch ms; default now; accepted from 2 h old to 60 s ahead'),
    flags: FlagValues.optional().describe('flagKey -> the value the client saw'),
  })
  .strict();

const TrackBody = z
  .object({
    serviceId: idSchema,
    environment: Environment,
    // Items are validated one by one in the handler: one bad event never rejects the rest.
    events: z.array(z.unknown()).max(TRACK_MAX_EVENTS).describe(`At most ${TRACK_MAX_EVENTS} events: {event, targetingKey, value?, timestamp?, flags?}`),
  })
  .strict();

const TrackResponse = z.object({
  accepted: z.number().int(),
  rejected: z.number().int(),
  errors: z.array(z.object({ index: z.number().int(), message: z.string() })),
});

const ActiveFlags = FlagValues.optional().describe('flagKey -> value the client had');
const Millis = z.number().finite().nonnegative();
const Count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

const TelemetryBody = z
  .object({
    serviceId: idSchema,
    environment: Environment,
    summaries: z
      .array(
        z
          .object({
            flagKey: z.string().min(1).max(256),
            variant: z.string().max(256).default(''),
            evaluations: Count,
            cacheHits: Count.default(0),
            cacheMisses: Count.default(0),
            avgLatencyMs: Millis.default(0),
          })
          .strict(),
      )
      .max(TELEMETRY_LIMITS.summaries)
      .default([]),
    webVitals: z
      .array(
        z
          .object({
            name: z
              .string()
              .transform((s) => s.toLowerCase())
              .pipe(z.enum(['lcp', 'cls', 'inp', 'ttfb', 'fcp'])),
            value: z.number().finite(),
            rating: z.enum(['good', 'needs-improvement', 'poor']).optional(),
            activeFlags: ActiveFlags,
            timestamp: EventTime.optional(),
            sessionId: z.string().max(128).optional(),
            url: z.string().max(TELEMETRY_LIMITS.url).optional(),
          })
          .strict(),
      )
      .max(TELEMETRY_LIMITS.webVitals)
      .default([]),
    errors: z
      .array(
        z
          .object({
            message: z.string().min(1).max(TELEMETRY_LIMITS.message),
            stack: z.string().max(TELEMETRY_LIMITS.stack).optional(),
            activeFlags: ActiveFlags,
            timestamp: EventTime.optional(),
            sessionId: z.string().max(128).optional(),
            url: z.string().max(TELEMETRY_LIMITS.url).optional(),
          })
          .strict(),
      )
      .max(TELEMETRY_LIMITS.errors)
      .default([]),
    diagnostics: z
      .object({
        totalEvaluations: Count,
        cacheHits: Count,
        cacheHitRatio: z.number().min(0).max(1),
        trackedFlagsCount: z.number().int().nonnegative().max(4_294_967_295),
      })
      .strict()
      .optional(),
  })
  .strict();

const TelemetryResponse = z.object({
  success: z.literal(true),
  processed: z.object({
    evaluations: z.number().int().describe('Summaries stored'),
    webVitals: z.number().int(),
    errors: z.number().int(),
  }),
});

export interface SdkIngestDeps {
  sink: AnalyticsSink;
  sites: IngestSites;
  /** A user's role on a project (ProjectAccess.roleOf), for sessions. */
  roleOf: (userId: string, projectId: string) => Promise<ProjectRole | null>;
}

/**
 * flags:read on the service's project, decided as evaluation decides (`decide`) but over the
 * 10 s site cache: a project token, the usual caller, costs no query per request. Anonymous 401;
 * no access to the project 404 like an unknown service; access without read 403.
 */
export async function serviceReader(deps: SdkIngestDeps, principal: Principal, serviceId: string): Promise<ProjectGrant[]> {
  if (principal.type === 'anonymous') throw unauthorized();
  // A bound project token reaches only its own service (docs/api-reference.md#project-api-tokens).
  if (principal.type === 'project_api_token' && principal.scope && principal.scope.serviceId !== serviceId) throw notFound('Service');
  const site = (await deps.sites.resolve([serviceId])).get(serviceId);
  if (!site) throw notFound('Service');
  const role = principal.type === 'project_api_token' ? null : await deps.roleOf(principal.user.id, site.projectId);
  const denial = decide(principal, site.projectId, role, 'flags:read');
  if (denial) throw refusal(denial, 'flags:read', 'Service');
  return [{ projectId: site.projectId, orgId: site.orgId, role }];
}

/** The environment events are recorded under: the named one, else a bound token's, else development. */
function environmentOf(principal: Principal, named: Environment | undefined): Environment {
  return targetEnvironment(principal, named) ?? DEFAULT_ENVIRONMENT;
}

/**
 * SDK ingestion (both listeners; docs/api-reference.md#outcome-events,
 * docs/analytics-ingestion.md): outcome events and telemetry. Callers authenticate like evaluation:
 * a project API token with `read` (or a member's session) of the service's project; personal tokens
 * are refused as on every SDK route.
 */
export function sdkIngestRoutes(deps: SdkIngestDeps): AnyRoute[] {
  const { sink } = deps;
  const readsService = (principal: Principal, serviceId: string, environment: Environment | undefined) => {
    // A bound token's events belong to its own environment: naming another is refused like another service.
    targetEnvironment(principal, environment);
    return serviceReader(deps, principal, serviceId);
  };
  return [
    defineRoute({
      method: 'post',
      path: '/api/analytics/track',
      summary: 'Record outcome events (OpenFeature track over HTTP): conversions, errors, latencies; each event validated on its own',
      tags: ['analytics'],
      auth: 'authenticated',
      sdk: true,
      access: { capability: 'flags:read', check: (principal, ctx) => readsService(principal, ctx.body.serviceId, ctx.body.environment) },
      status: 202,
      bodyLimit: BODY_LIMITS.default,
      body: TrackBody,
      response: TrackResponse,
      handler(ctx) {
        const { serviceId, events } = ctx.body;
        const environment = environmentOf(ctx.principal, ctx.body.environment);
        const projectId = ctx.granted[0].projectId;
        const now = Date.now();
        const rows: PendingRow[] = [];
        const errors: ItemProblem[] = [];
        events.forEach((item, index) => {
          const parsed = parseItem(TrackEvent, item);
          if (!parsed.ok) return errors.push({ index, message: parsed.message });
          const event = parsed.value;
          const timestamp = inWindow(event.timestamp, now);
          if (typeof timestamp === 'string') return errors.push({ index, message: timestamp });
          const row: OutcomeRow = {
            timestamp,
            projectId,
            serviceId,
            environment,
            event: event.event,
            targetingKeyHash: hashTargetingKey(event.targetingKey),
            value: event.value ?? null,
            flags: event.flags ?? {},
            origin: 'track',
            eventId: newEventId(),
          };
          rows.push(pending('outcome_events', row));
        });
        recordAll(sink, rows);
        return { accepted: rows.length, rejected: errors.length, errors };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/analytics/sdk-telemetry',
      summary: "An SDK's periodic report: evaluation summaries, diagnostics, web vitals and errors (errors also count as `error` outcome events of their active flags)",
      tags: ['analytics'],
      auth: 'authenticated',
      sdk: true,
      access: { capability: 'flags:read', check: (principal, ctx) => readsService(principal, ctx.body.serviceId, ctx.body.environment) },
      bodyLimit: BODY_LIMITS.default,
      body: TelemetryBody,
      response: TelemetryResponse,
      handler(ctx) {
        const { serviceId, summaries, webVitals, errors, diagnostics } = ctx.body;
        const environment = environmentOf(ctx.principal, ctx.body.environment);
        const projectId = ctx.granted[0].projectId;
        const now = Date.now();
        const tenant = { projectId, serviceId, environment };
        const rows: PendingRow[] = [];
        for (const s of summaries) {
          rows.push(
            pending('sdk_telemetry', {
              timestamp: now,
              ...tenant,
              flagKey: s.flagKey,
              variant: s.variant,
              evaluations: s.evaluations,
              cacheHits: s.cacheHits,
              cacheMisses: s.cacheMisses,
              avgLatencyMs: s.avgLatencyMs,
              eventId: newEventId(),
            }),
          );
        }
        if (diagnostics) {
          rows.push(
            pending('sdk_diagnostics', {
              timestamp: now,
              ...tenant,
              totalEvaluations: diagnostics.totalEvaluations,
              cacheHits: diagnostics.cacheHits,
              cacheHitRatio: diagnostics.cacheHitRatio,
              trackedFlags: diagnostics.trackedFlagsCount,
              eventId: newEventId(),
            }),
          );
        }
        // Samples outside the accepted window (a skewed or long-offline client) are left out and
        // not counted in `processed`: the report's answer has no per-item rejections
        // (docs/analytics-ingestion.md).
        let vitals = 0;
        for (const v of webVitals) {
          const timestamp = inWindow(v.timestamp, now);
          if (typeof timestamp === 'string') continue;
          vitals++;
          rows.push(
            pending('web_vitals', {
              timestamp,
              ...tenant,
              origin: 'sdk',
              name: v.name,
              value: v.value,
              rating: v.rating ?? '',
              activeFlags: v.activeFlags ?? {},
              sessionId: v.sessionId ?? '',
              url: v.url ?? '',
              eventId: newEventId(),
            }),
          );
        }
        let failures = 0;
        for (const e of errors) {
          const timestamp = inWindow(e.timestamp, now);
          if (typeof timestamp === 'string') continue;
          failures++;
          const activeFlags = e.activeFlags ?? {};
          rows.push(
            pending('client_errors', {
              timestamp,
              ...tenant,
              origin: 'sdk',
              fingerprint: hashTargetingKey(e.message),
              message: e.message,
              stack: e.stack ?? '',
              activeFlags,
              sessionId: e.sessionId ?? '',
              url: e.url ?? '',
              eventId: newEventId(),
            }),
          );
          // Each error is one `error` outcome event attributed through its active flags
          // (docs/api-reference.md#outcome-events).
          rows.push(
            pending('outcome_events', {
              timestamp,
              ...tenant,
              event: 'error',
              targetingKeyHash: '',
              value: null,
              flags: activeFlags,
              origin: 'sdk-telemetry',
              eventId: newEventId(),
            }),
          );
        }
        recordAll(sink, rows);
        return { success: true as const, processed: { evaluations: summaries.length, webVitals: vitals, errors: failures } };
      },
    }),
  ];
}
