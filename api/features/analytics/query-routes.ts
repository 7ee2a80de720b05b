import type { Sql } from 'postgres';
import { z } from 'zod';
import type { Analytics } from '../../../analytics/client';
import type { ProjectAccess, ProjectGrant } from '../../auth/access';
import { notFound } from '../../http/errors';
import { defineRoute, reply, privateMaxAge, PRIVATE_NO_CACHE, type AnyRoute } from '../../http/route';
import { EnvironmentSchema } from '../../domain/environments';
import { flagKeySchema, idSchema } from '../projects/common';
import { ADMIN_FUNNEL_STEPS, adminFunnel, adoptionCohorts } from './queries/admin';
import { eventNames } from './queries/event-names';
import { flagFunnel, MAX_FUNNEL_STEPS } from './queries/funnel';
import { rangeParam, windowOf } from './queries/range';
import { sdkTelemetry } from './queries/sdk-telemetry';
import { flagImpact, latestEvents, overview, VITAL_METRICS, vitals, type Site } from './queries/site';
import { flagVariants } from './queries/variants';

/**
 * The analytics queries (GET /api/analytics/..., docs/analytics.md). Every one needs a credential
 * and
 * `flags:read` on the project it reads: named by `siteId` (a service id), `serviceId` or
 * `projectId`. A project the caller cannot see answers 404 like a missing one.
 */

/** Outcome event names (docs/api-reference.md#outcome-events). */
export const eventNameSchema = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1-64 of A-Z a-z 0-9 _ . : -');
const environment = EnvironmentSchema;
const PERIODS = ['1h', '24h', '7d', '30d'] as const;

/** The site a `siteId` route reads: the service and the project its access rule resolved. */
const siteOf = (granted: ProjectGrant[], siteId: string): Site => ({ projectId: granted[0].projectId, siteId });

const stepsSchema = z
  .string()
  .max(MAX_FUNNEL_STEPS * 65)
  .transform((s) => s.split(',').map((step) => step.trim()))
  .pipe(
    z
      .array(eventNameSchema)
      .min(2, 'needs at least 2 steps')
      .max(MAX_FUNNEL_STEPS, `at most ${MAX_FUNNEL_STEPS} steps`)
      .refine((steps) => new Set(steps).size === steps.length, 'steps must not repeat'),
  )
  .describe(`Comma-separated event names, in order (2-${MAX_FUNNEL_STEPS}, no repeats)`);

const rate = z.number().min(0);
const count = z.number().int().min(0);
const nullableNumber = z.number().nullable();
const vitalSummary = z.object({ metric: z.enum(VITAL_METRICS), p50: nullableNumber, p75: nullableNumber, p95: nullableNumber, count });
const Responses = {
  sdkTelemetry: z.object({
    range: z.string(),
    totalEvaluations: count,
    cacheHitRatio: rate,
    evaluationSummaries: z.array(
      z.object({ flagKey: z.string(), variant: z.string(), evaluations: count, cacheHits: count, cacheMisses: count, cacheHitRatio: rate, avgLatencyMs: nullableNumber }),
    ),
    webVitals: z.array(z.object({ metric: z.string(), count, p75: nullableNumber, ratings: z.object({ good: count, 'needs-improvement': count, poor: count }) })),
    topErrors: z.array(z.object({ message: z.string(), count, firstSeen: z.string(), lastSeen: z.string(), correlatedFlags: z.array(z.string()) })),
  }),
  overview: z.object({ visitors: count, pageviews: count, avgSessionDuration: z.number().min(0).describe('ms'), bounceRate: rate, range: z.string() }),
  vitals: z.object({ vitals: z.array(vitalSummary), timeSeries: z.array(vitalSummary.extend({ timestamp: z.string() })), range: z.string() }),
  flagImpact: z.object({
    impact: z.array(
      z.object({
        flagKey: z.string(),
        variants: z.array(z.object({ variant: z.string(), pageviews: count, sessions: count, lcpP75: nullableNumber, avgCls: nullableNumber })),
      }),
    ),
    range: z.string(),
  }),
  adminFunnel: z.object({
    projectId: z.string(),
    range: z.string(),
    funnel: z.object({ steps: z.array(z.object({ event: z.enum(ADMIN_FUNNEL_STEPS), users: count, conversionRate: rate, dropOffRate: rate })) }),
    experimentCycleTime: z.object({ sampleSize: count, medianHours: nullableNumber }),
  }),
  adoptionCohorts: z.object({
    projectId: z.string(),
    range: z.string(),
    cohorts: z.array(z.object({ week: z.string(), createdProjects: count, adoptedProjects: count, adoptionRate: rate })),
  }),
  events: z.object({
    events: z.array(
      z.object({
        id: z.string(),
        type: z.string(),
        url: z.string(),
        timestamp: z.string(),
        country: z.string(),
        browser: z.string(),
        os: z.string(),
        device: z.string(),
        flags: z.record(z.unknown()),
        data: z.unknown(),
      }),
    ),
  }),
  variants: z.object({
    flagKey: z.string(),
    environment: z.string(),
    period: z.string(),
    variants: z.array(
      z.object({
        variant: z.string(),
        evaluations: count,
        conversions: count,
        conversionRate: rate,
        avgEventValue: nullableNumber,
        latencyP50: nullableNumber,
        latencyP99: nullableNumber,
        conversionInterval: z
          .object({ low: rate, high: rate })
          .nullable()
          .describe('Wilson 95% interval of conversionRate; null without evaluations or with more conversions than evaluations'),
      }),
    ),
    totalEvaluations: count,
    totalConversions: count,
    overallConversionRate: rate,
  }),
  eventNames: z.object({ projectId: z.string(), period: z.string(), names: z.array(z.object({ name: z.string(), count })) }),
  funnel: z.object({
    projectId: z.string(),
    flagKey: z.string(),
    steps: z.array(z.string()),
    funnelSteps: z.array(z.object({ step: z.string(), stepIndex: count, totalUsers: count, byVariant: z.record(count), dropOffRate: rate })),
    variants: z.array(z.string()),
    overallConversionRate: rate,
  }),
};

export interface AnalyticsQueryDeps {
  analytics: Analytics;
  sql: Sql;
  access: ProjectAccess;
}

export function analyticsQueryRoutes(deps: AnalyticsQueryDeps): AnyRoute[] {
  const { analytics, sql, access } = deps;
  const tags = ['analytics'];

  /** `projectSlug`, when given, must be the slug of `projectId` (else the project is not found). */
  async function checkSlug(projectId: string, slug: string | undefined) {
    if (slug === undefined) return;
    const [row] = await sql<{ slug: string }[]>`SELECT slug FROM projects WHERE id = ${projectId}`;
    if (row?.slug !== slug) throw notFound('Project');
  }

  /** An optional `serviceId` beside `projectId` must be one of that project's services. */
  async function checkService(projectId: string, serviceId: string | undefined) {
    if (serviceId === undefined) return;
    const [row] = await sql`SELECT 1 FROM services WHERE id = ${serviceId} AND project_id = ${projectId}`;
    if (!row) throw notFound('Service');
  }

  return [
    defineRoute({
      method: 'get',
      path: '/api/analytics/sdk-telemetry',
      summary: 'What SDKs reported: evaluation summaries, cache hit ratio, web vitals and top errors',
      tags,
      auth: 'authenticated',
      // No serviceId: every project the caller may read.
      access: { capability: 'flags:read', service: (ctx) => ctx.query.serviceId },
      query: z.object({
        serviceId: idSchema.optional(),
        environment: environment.optional(),
        flagKey: flagKeySchema.optional(),
        range: rangeParam(['1h', '6h', '24h', '7d'], '24h'),
      }),
      response: Responses.sdkTelemetry,
      async handler({ query, granted }) {
        const report = await sdkTelemetry(analytics, { projectIds: granted.map((g) => g.projectId), ...query }, windowOf(query.range));
        return reply(200, { range: query.range, ...report }, PRIVATE_NO_CACHE);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/overview',
      summary: 'Visitors, pageviews, average session duration (ms) and bounce rate (0-1) of a site',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.siteId },
      query: z.object({ siteId: idSchema, range: rangeParam(PERIODS, '24h') }),
      response: Responses.overview,
      async handler({ query, granted }) {
        const result = await overview(analytics, siteOf(granted, query.siteId), windowOf(query.range));
        return reply(200, { ...result, range: query.range }, PRIVATE_NO_CACHE);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/vitals',
      summary: 'Web vitals p50/p75/p95 per metric and over time, optionally for pages with a flag active',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.siteId },
      query: z.object({ siteId: idSchema, range: rangeParam(PERIODS, '24h'), flagKey: flagKeySchema.optional() }),
      response: Responses.vitals,
      async handler({ query, granted }) {
        const result = await vitals(analytics, siteOf(granted, query.siteId), windowOf(query.range), query.flagKey);
        return reply(200, { ...result, range: query.range }, privateMaxAge(30));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/flag-impact',
      summary: 'Pageviews, sessions, LCP p75 and mean CLS per flag value the pages had',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.siteId },
      query: z.object({ siteId: idSchema, range: rangeParam(PERIODS, '24h') }),
      response: Responses.flagImpact,
      async handler({ query, granted }) {
        const impact = await flagImpact(analytics, siteOf(granted, query.siteId), windowOf(query.range));
        return reply(200, { impact, range: query.range }, privateMaxAge(30));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/admin-funnel',
      summary: 'Console funnel screen_viewed -> flag_viewed -> activation per user, and experiment cycle time',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      query: z.object({ projectId: idSchema, projectSlug: z.string().min(1).max(64).optional(), range: rangeParam(['24h', '7d', '30d'], '7d') }),
      response: Responses.adminFunnel,
      async handler({ query }) {
        await checkSlug(query.projectId, query.projectSlug);
        const result = await adminFunnel(analytics, query.projectId, windowOf(query.range));
        return reply(200, { projectId: query.projectId, range: query.range, ...result }, privateMaxAge(30));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/adoption-cohorts',
      summary: "Projects created per week in the project's organization and how many of them have evaluation traffic",
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      query: z.object({ projectId: idSchema, projectSlug: z.string().min(1).max(64).optional(), range: rangeParam(['7d', '30d', '90d'], '30d') }),
      response: Responses.adoptionCohorts,
      async handler({ query, granted, principal }) {
        await checkSlug(query.projectId, query.projectSlug);
        // Only projects the caller may read themselves: the organization's others stay unseen.
        const readable = (await access.listAccessible(principal, 'flags:read')).filter((g) => g.orgId === granted[0].orgId);
        const cohorts = await adoptionCohorts(analytics, sql, readable.map((g) => g.projectId), windowOf(query.range));
        return reply(200, { projectId: query.projectId, range: query.range, cohorts }, privateMaxAge(60));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/events',
      summary: 'The latest browser events of a site, newest first',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', service: (ctx) => ctx.query.siteId },
      query: z.object({ siteId: idSchema, limit: z.coerce.number().int().min(1).max(100).default(50) }),
      response: Responses.events,
      async handler({ query, granted }) {
        const events = await latestEvents(analytics, siteOf(granted, query.siteId), query.limit);
        return reply(200, { events }, privateMaxAge(5));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/flags/:key/variants',
      summary: 'Evaluations, attributed conversions, conversion rate, mean event value and latency per flag value',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      params: z.object({ key: flagKeySchema }),
      query: z.object({
        projectId: idSchema,
        environment,
        period: rangeParam(PERIODS, '24h'),
        serviceId: idSchema.optional(),
        eventName: eventNameSchema.optional().describe('The conversion event; default every event but error and latency'),
      }),
      response: Responses.variants,
      async handler({ params, query }) {
        await checkService(query.projectId, query.serviceId);
        const scope = { projectId: query.projectId, environment: query.environment, flagKey: params.key, serviceId: query.serviceId };
        const report = await flagVariants(analytics, scope, windowOf(query.period), query.eventName);
        return reply(200, { flagKey: params.key, environment: query.environment, period: query.period, ...report }, privateMaxAge(30));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/events/names',
      summary: 'The outcome event names of a project or service, the most frequent first (at most 200)',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      query: z.object({ projectId: idSchema, serviceId: idSchema.optional(), period: rangeParam(['24h', '7d', '30d'], '30d') }),
      response: Responses.eventNames,
      async handler({ query }) {
        await checkService(query.projectId, query.serviceId);
        const names = await eventNames(analytics, query, windowOf(query.period));
        return reply(200, { projectId: query.projectId, period: query.period, names }, privateMaxAge(30));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/analytics/funnel',
      summary: 'Ordered funnel of outcome events per user, split by the value a flag gave them',
      tags,
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      query: z.object({
        projectId: idSchema,
        flagKey: flagKeySchema,
        steps: stepsSchema,
        environment,
        period: rangeParam(PERIODS, '24h'),
        serviceId: idSchema.optional(),
      }),
      response: Responses.funnel,
      async handler({ query }) {
        await checkService(query.projectId, query.serviceId);
        const scope = { projectId: query.projectId, environment: query.environment, flagKey: query.flagKey, serviceId: query.serviceId };
        const report = await flagFunnel(analytics, scope, windowOf(query.period), query.steps);
        return reply(200, { projectId: query.projectId, flagKey: query.flagKey, steps: query.steps, ...report }, privateMaxAge(30));
      },
    }),
  ];
}
