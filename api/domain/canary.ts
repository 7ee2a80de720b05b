import { z } from 'zod';
import { EnvironmentSchema } from './environments';
import { GuardResultSchema, GuardsSchema } from './guards';

/**
 * Every shape of a canary pipeline, once: the routes' request and response schemas
 * (api/features/canary/routes.ts), the service, the store's rows, the workflow's input and
 * messages (workflows/messages.ts) and the activities take their types from here with z.infer,
 * and the OpenAPI document from the same objects (docs/canary.md). The workflow bundle includes
 * it, so like all of api/domain/ it imports nothing but zod.
 */

export const MAX_SOAK_MINUTES = 10_080;

const percent = z.number().finite().gt(0).max(100);
const soakPeriodMinutes = z.number().finite().min(0.05).max(MAX_SOAK_MINUTES).describe('Minutes each stage soaks; fractions down to 0.05 (3 s)');
const minSamplesPerCohort = z.number().int().min(1).max(10_000_000);
const alpha = z.number().finite().gt(0).max(0.5);
const maxWaitMinutesDescription = 'How long a stage waits for enough data past its soak; default max(10 soaks, 1 minute)';

/** A pipeline's configuration as it runs and is stored: the start request with its defaults applied. */
export const CanaryConfigSchema = z
  .object({
    initialRolloutPercent: percent,
    targetRolloutPercent: percent,
    rampStepPercent: percent,
    soakPeriodMinutes,
    errorRateGateDelta: z.number().finite().min(0).max(1).describe('Tolerated rise of the error rate (absolute, 0-1)'),
    latencyGateDeltaMs: z.number().finite().min(0).max(600_000).describe('Tolerated rise of the mean latency in ms'),
    autoRollbackOnBreach: z.boolean(),
    minSamplesPerCohort,
    // The default, 10 soaks, may exceed what a request may ask for.
    maxWaitMinutes: z.number().finite().min(0).max(10 * MAX_SOAK_MINUTES).describe(maxWaitMinutesDescription),
    alpha,
    guards: GuardsSchema.optional().describe('Prometheus guards checked at every gate (docs/canary.md#prometheus-guards); absent: none'),
  })
  .strict();
export type CanaryConfig = z.infer<typeof CanaryConfigSchema>;

/** The configuration a start request gives: the same fields, with defaults for the optional ones. */
export const CanaryConfigRequestSchema = CanaryConfigSchema.extend({
  minSamplesPerCohort: minSamplesPerCohort.default(100),
  maxWaitMinutes: z.number().finite().min(0).max(MAX_SOAK_MINUTES).optional().describe(maxWaitMinutesDescription),
  alpha: alpha.default(0.05),
});
export type CanaryConfigRequest = z.infer<typeof CanaryConfigRequestSchema>;

/** The effective configuration of a request: an absent maxWaitMinutes is the larger of 10 soak periods and 1 minute. */
export function canaryConfigOf(request: CanaryConfigRequest): CanaryConfig {
  // strip(): a start request carries more than the configuration (the rule to ramp).
  return CanaryConfigSchema.strip().parse({ ...request, maxWaitMinutes: request.maxWaitMinutes ?? Math.max(10 * request.soakPeriodMinutes, 1) });
}

export const CANARY_STATUSES = ['running', 'paused', 'completed', 'rolled_back', 'aborted'] as const;
export type CanaryStatus = (typeof CANARY_STATUSES)[number];
/** Statuses of a pipeline that still acts: at most one per flag, service and environment. */
export const ACTIVE_STATUSES: readonly CanaryStatus[] = ['running', 'paused'];

export const CanaryCohortSchema = z.object({
  exposures: z.number(),
  errors: z.number(),
  errorRate: z.number(),
  latencyP50: z.number().nullable(),
  latencyP99: z.number().nullable(),
});

/** A gate's evidence, as api/lib/release-safety/gates.ts evaluateGate answers it (docs/release-safety-statistics.md). */
export const CanaryGateSchema = z.object({
  decision: z.enum(['pass', 'fail', 'wait']),
  reason: z.string(),
  test: z.string(),
  alpha: z.number(),
  treatment: CanaryCohortSchema,
  control: CanaryCohortSchema,
  errorRateDelta: z.object({ estimate: z.number(), lower: z.number(), upper: z.number() }),
  /** Null when a side has fewer than two latency samples (services that send no latency). */
  latencyDeltaMs: z.object({ estimate: z.number().nullable(), lower: z.number().nullable(), upper: z.number().nullable() }),
  srm: z.object({ pValue: z.number(), ok: z.boolean() }),
  /** The answers of the pipeline's Prometheus guards, when it has any. */
  guards: z.array(GuardResultSchema).optional(),
});
export type CanaryGate = z.infer<typeof CanaryGateSchema>;

export const CanaryStageSchema = z.object({
  index: z.number().int(),
  rolloutPercent: z.number(),
  startedAt: z.string(),
  endedAt: z.string().optional(),
  gate: CanaryGateSchema.optional(),
  forcedBy: z.string().optional().describe('Set when an operator advanced past the soak and gate (force): who did'),
});
export type CanaryStage = z.infer<typeof CanaryStageSchema>;

/**
 * From the latest gate: fail is breach; pass, or a wait with enough exposures per side and a
 * sound split, is healthy; any other wait insufficient_data; pending before the first.
 */
export const CanaryHealthSchema = z.object({
  status: z.enum(['pending', 'healthy', 'insufficient_data', 'breach']),
  checkedAt: z.string().nullable(),
  gate: CanaryGateSchema.nullable(),
});
export type CanaryHealth = z.infer<typeof CanaryHealthSchema>;

/** What the workflow persists at every change and answers to its query and updates. */
export const CanaryStateSchema = z.object({
  status: z.enum(CANARY_STATUSES),
  currentStage: CanaryStageSchema.nullable(),
  completedStages: z.array(CanaryStageSchema),
  /** When the current stage's soak ends (workflow time). */
  soakEndsAt: z.string().nullable(),
  health: CanaryHealthSchema,
  /** Why the pipeline paused or ended (breach, too little data, abort reason). */
  statusReason: z.string().nullable(),
});
export type CanaryState = z.infer<typeof CanaryStateSchema>;

/** The record the API answers. */
export const CanaryRecordSchema = z.object({
  id: z.string(),
  flagKey: z.string(),
  serviceId: z.string(),
  environment: EnvironmentSchema,
  ruleId: z.string(),
  status: CanaryStateSchema.shape.status,
  statusReason: CanaryStateSchema.shape.statusReason,
  config: CanaryConfigSchema,
  currentStage: CanaryStateSchema.shape.currentStage,
  completedStages: CanaryStateSchema.shape.completedStages,
  remainingSoakSeconds: z.number(),
  health: CanaryHealthSchema,
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type CanaryRecord = z.infer<typeof CanaryRecordSchema>;

/** What the pipeline works on: one flag in one service and environment, and whose it is. */
export const CanaryTargetSchema = z
  .object({ projectId: z.string().min(1), orgId: z.string().min(1), serviceId: z.string().min(1), environment: EnvironmentSchema, flagKey: z.string().min(1) })
  .strict();
export type CanaryTarget = z.infer<typeof CanaryTargetSchema>;
