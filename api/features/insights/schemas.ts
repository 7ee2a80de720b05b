import { z } from 'zod';

/** The documented response bodies of the insight routes (OpenAPI; docs/insights.md explains each field). */

const count = z.number().int().nonnegative();
const rate = z.number().describe('0-1');
const ms = z.number().nullable().describe('Milliseconds; null without evaluations');
const iso = z.string().describe('ISO 8601 time');
/** Application outcomes (docs/insights.md#error-rate), and failed evaluations apart. */
const errors = count.describe('Application errors: `error` outcome events attributed to the flag');
const evaluationErrors = count.describe('Failed evaluations (an error code), not counted in errors or errorRate');

const range = z.object({ start: iso, end: iso, rangeLabel: z.string(), minutes: count });

const toggle = z.object({
  id: z.string(),
  timestamp: iso,
  timestampMs: z.number(),
  actor: z.string(),
  transition: z.object({ from: z.enum(['enabled', 'disabled']), to: z.enum(['enabled', 'disabled']) }),
  environment: z.string(),
  durationMs: z.number(),
});

const side = z.object({ evaluations: count, errors, errorRate: rate, evaluationErrors, avgLatencyMs: ms, p99LatencyMs: ms, start: iso, end: iso });
const delta = z.object({ errorRateDelta: z.number(), latencyP99DeltaMs: z.number().nullable(), evaluationsRatio: z.number().nullable() });

const impact = z.object({
  hasRecentToggle: z.boolean(),
  latestToggle: toggle.nullable(),
  healthStatus: z.enum(['none', 'insufficient_data', 'healthy', 'warning', 'degraded']),
  windowMinutes: count,
  before: side.nullable(),
  after: side.nullable(),
  delta: delta.nullable(),
  recommendation: z.string(),
});

const flagOf = { flagKey: z.string(), serviceId: z.string(), environment: z.string() };

export const MetricsResponse = z.object({
  ...flagOf,
  source: z.string(),
  range,
  bucketMinutes: count,
  summary: z.object({
    totalEvaluations: count,
    totalErrors: errors,
    errorRate: rate,
    evaluationErrors,
    avgLatencyMs: ms,
    p50LatencyMs: ms,
    p95LatencyMs: ms,
    p99LatencyMs: ms,
    evaluationsPerMinute: z.number(),
    evaluationsPerSecond: z.number(),
  }),
  realtime: z.object({
    evaluationsPerSecond: z.number(),
    evaluationsPerMinute: z.number(),
    evaluationsLastMinute: count,
    evaluationsLast5Min: count,
    errorRateLastMinute: rate,
    evaluationErrorsLastMinute: evaluationErrors,
    trend: z.enum(['increasing', 'decreasing', 'stable', 'idle']),
    lastEvaluatedAt: iso.nullable(),
    topReason: z.string().nullable(),
  }),
  toggleImpact: impact,
  recentToggles: z.array(toggle),
  reasonBreakdown: z.record(count),
  valueBreakdown: z.record(count),
  timeSeries: z.array(
    z.object({ timestamp: iso, evaluations: count, errors, evaluationErrors, avgLatencyMs: ms, p50LatencyMs: ms, p95LatencyMs: ms, p99LatencyMs: ms }),
  ),
});

export const ToggleImpactResponse = z.object({ ...flagOf, range, impact, recentToggles: z.array(toggle) });

export const AutoRollbackResponse = z.object({
  ...flagOf,
  dryRun: z.boolean(),
  windowMinutes: count,
  actionTaken: z.enum(['none', 'would_roll_back', 'rolled_back']),
  reason: z.string(),
  tripped: z.boolean(),
  targetVersionNumber: z.number().int().nullable(),
  newVersionNumber: z.number().int().optional().describe('The version the rollback wrote'),
  alertNotifiedChannels: z.array(z.object({ id: z.string(), name: z.string(), type: z.string() })),
  alertError: z.string().optional(),
  limits: z.object({ maxErrorRateDelta: z.number(), maxLatencyDeltaMs: z.number() }),
  change: z.object({ version: z.number().int(), changeType: z.string(), actor: z.string(), timestamp: iso }).nullable(),
  before: side.optional(),
  after: side.optional(),
  delta: delta.optional(),
});

export const StaleFlagsResponse = z.object({
  projectId: z.string(),
  generatedAt: iso,
  total: count,
  staleCount: count,
  inactiveCount: count,
  launchedCount: count,
  potentialTechDebtFlags: count,
  averageStalenessScore: z.number(),
  reports: z.array(
    z.object({
      ...flagOf,
      status: z.enum(['active', 'stale', 'inactive']),
      category: z.enum(['active', 'in_rollout', 'stale_rolled_out', 'stale_rolled_back', 'inactive_enabled', 'inactive_disabled']),
      daysInactive: count,
      neverEvaluated: z.boolean(),
      daysSinceLastMutation: count,
      rolloutPercentage: z.number(),
      stalenessScore: z.number().int().min(0).max(100),
      recommendation: z.string(),
      codeRemovalAdvice: z.string(),
    }),
  ),
});

export const HealthResponse = z.object({
  projectId: z.string(),
  score: z.number().int().min(0).max(100),
  status: z.enum(['healthy', 'degraded', 'critical', 'no_data']),
  scoreBreakdown: z.object({ errorPenalty: z.number(), latencyPenalty: z.number(), trafficDropPenalty: z.number() }),
  window: z.object({ start: iso, end: iso, minutes: count }),
  totalEvaluations: count,
  previousWindowEvaluations: count,
  evaluationsPerMinute: z.number(),
  errorRate: rate,
  evaluationErrors,
  p99LatencyMs: ms,
  services: z.array(
    z.object({
      serviceId: z.string(),
      name: z.string(),
      status: z.enum(['healthy', 'degraded', 'critical', 'idle']),
      evaluations: count,
      errors,
      errorRate: rate,
      evaluationErrors,
      p99LatencyMs: ms,
    }),
  ),
  issues: z.array(
    z.object({
      type: z.enum(['error_rate', 'latency']),
      severity: z.enum(['critical', 'warning']),
      ...flagOf,
      value: z.number(),
      threshold: z.number(),
      evaluations: count,
      message: z.string(),
    }),
  ),
  source: z.string(),
});

export const HeatmapResponse = z.object({
  projectId: z.string(),
  serviceId: z.string().nullable(),
  environment: z.string().nullable(),
  range,
  bucketMinutes: count,
  buckets: z.array(iso).describe('Start of each column'),
  flags: z.array(z.object({ flagKey: z.string(), serviceId: z.string(), total: count, counts: z.array(count).describe('One per bucket') })),
  totalFlags: count,
  totalEvaluations: count,
  maxCount: count,
  source: z.string(),
});

export const AlertsResponse = z.object({
  status: z.enum(['ok', 'firing']),
  firingCount: count,
  alerts: z.array(
    z.object({
      name: z.enum(['flag_error_rate', 'p99_latency', 'evaluation_drop', 'client_error_spike']),
      projectId: z.string(),
      status: z.enum(['firing', 'resolved']),
      severity: z.enum(['critical', 'warning']),
      description: z.string(),
      value: z.number(),
      threshold: z.number(),
    }),
  ),
  evaluatedAt: iso,
  window: z.object({ start: iso, end: iso, minutes: count }),
});
