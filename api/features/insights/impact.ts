import type { EvaluationStats } from './warehouse';

/**
 * Before/after comparison of a flag change, without I/O: the toggle-impact verdict and the
 * auto-rollback decision. Both need a minimum sample after the change, and an error-rate rise
 * counts only when a one-sided two-proportion z-test finds it significant (alpha 0.05): a
 * threshold on two small-sample rates alone would roll back on noise.
 */

/** Evaluations after the change below which nothing is judged. */
export const MIN_SAMPLE_AFTER = 20;
/** One-sided alpha 0.05. */
const Z_CRITICAL = 1.645;

/** The auto-rollback endpoint's defaults, shared by the production guardrail (docs/guardrails.md). */
export const AUTO_ROLLBACK_DEFAULTS = { windowMinutes: 15, maxErrorRateDelta: 0.02, maxLatencyDeltaMs: 200 } as const;

/** Toggle-impact thresholds: error-rate rise and p99 rise for `warning` and `degraded`. */
export const IMPACT_THRESHOLDS = {
  warning: { errorRateDelta: 0.01, latencyP99DeltaMs: 100 },
  degraded: { errorRateDelta: 0.05, latencyP99DeltaMs: 500 },
} as const;

export interface WindowSummary {
  evaluations: number;
  /** Application outcomes attributed to the flag (docs/insights.md#error-rate). */
  errors: number;
  errorRate: number;
  /** Failed evaluations, reported apart. */
  evaluationErrors: number;
  avgLatencyMs: number | null;
  p99LatencyMs: number | null;
}

export interface ImpactDelta {
  errorRateDelta: number;
  /** null when either window has no latency. */
  latencyP99DeltaMs: number | null;
  /** after / before evaluations; null when there were none before. */
  evaluationsRatio: number | null;
}

export type ImpactHealth = 'none' | 'insufficient_data' | 'healthy' | 'warning' | 'degraded';

export const round = (n: number, digits = 3) => Math.round(n * 10 ** digits) / 10 ** digits;
const roundOrNull = (n: number | null, digits = 3) => (n === null ? null : round(n, digits));
export const rateOf = (part: number, whole: number) => (whole > 0 ? part / whole : 0);

export function windowSummary(stats: EvaluationStats): WindowSummary {
  return {
    evaluations: stats.evaluations,
    errors: stats.errors,
    errorRate: round(rateOf(stats.errors, stats.evaluations), 6),
    evaluationErrors: stats.evaluationErrors,
    avgLatencyMs: stats.evaluations > 0 ? round(stats.latencySumMs / stats.evaluations) : null,
    p99LatencyMs: roundOrNull(stats.p99LatencyMs),
  };
}

export function compareWindows(before: WindowSummary, after: WindowSummary): ImpactDelta {
  return {
    errorRateDelta: round(after.errorRate - before.errorRate, 6),
    latencyP99DeltaMs: before.p99LatencyMs === null || after.p99LatencyMs === null ? null : round(after.p99LatencyMs - before.p99LatencyMs),
    evaluationsRatio: before.evaluations > 0 ? round(after.evaluations / before.evaluations, 4) : null,
  };
}

/**
 * Is the error rate after significantly higher than before? With no evaluations before there is
 * no baseline to test against: the caller's threshold alone decides.
 */
export function errorRiseSignificant(before: WindowSummary, after: WindowSummary): boolean {
  if (before.evaluations === 0) return true;
  const pooled = (before.errors + after.errors) / (before.evaluations + after.evaluations);
  if (pooled === 0 || pooled === 1) return false;
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / before.evaluations + 1 / after.evaluations));
  return (rateOf(after.errors, after.evaluations) - rateOf(before.errors, before.evaluations)) / se >= Z_CRITICAL;
}

interface Limits {
  errorRateDelta: number;
  latencyP99DeltaMs: number;
}

/** The limits `delta` exceeds, in words (empty when none). */
function breaches(before: WindowSummary, after: WindowSummary, delta: ImpactDelta, limits: Limits): string[] {
  const found: string[] = [];
  if (delta.errorRateDelta > limits.errorRateDelta && errorRiseSignificant(before, after)) {
    found.push(`error rate rose by ${round(delta.errorRateDelta * 100, 2)} points (${round(before.errorRate * 100, 2)}% -> ${round(after.errorRate * 100, 2)}%; limit ${round(limits.errorRateDelta * 100, 2)})`);
  }
  if (delta.latencyP99DeltaMs !== null && delta.latencyP99DeltaMs > limits.latencyP99DeltaMs) {
    found.push(`p99 latency rose by ${delta.latencyP99DeltaMs} ms (${before.p99LatencyMs} -> ${after.p99LatencyMs} ms; limit ${limits.latencyP99DeltaMs} ms)`);
  }
  return found;
}

export function impactVerdict(before: WindowSummary, after: WindowSummary, delta: ImpactDelta): { healthStatus: ImpactHealth; recommendation: string } {
  if (after.evaluations < MIN_SAMPLE_AFTER) {
    return {
      healthStatus: 'insufficient_data',
      recommendation: `Only ${after.evaluations} evaluations after the toggle; wait for at least ${MIN_SAMPLE_AFTER} before judging it.`,
    };
  }
  const degraded = breaches(before, after, delta, IMPACT_THRESHOLDS.degraded);
  if (degraded.length) return { healthStatus: 'degraded', recommendation: `Roll back and investigate: ${degraded.join('; ')}.` };
  const warning = breaches(before, after, delta, IMPACT_THRESHOLDS.warning);
  if (warning.length) return { healthStatus: 'warning', recommendation: `Watch closely and consider rolling back: ${warning.join('; ')}.` };
  return { healthStatus: 'healthy', recommendation: 'No significant rise in errors or latency after the toggle; keep it.' };
}

export function rollbackDecision(
  before: WindowSummary,
  after: WindowSummary,
  delta: ImpactDelta,
  limits: { maxErrorRateDelta: number; maxLatencyDeltaMs: number },
): { tripped: boolean; reason: string } {
  if (after.evaluations < MIN_SAMPLE_AFTER) {
    return { tripped: false, reason: `not enough evidence: ${after.evaluations} evaluations after the change, at least ${MIN_SAMPLE_AFTER} needed` };
  }
  const found = breaches(before, after, delta, { errorRateDelta: limits.maxErrorRateDelta, latencyP99DeltaMs: limits.maxLatencyDeltaMs });
  if (found.length) return { tripped: true, reason: found.join('; ') };
  return {
    tripped: false,
    reason: `within limits: error rate ${round(before.errorRate * 100, 2)}% -> ${round(after.errorRate * 100, 2)}%, p99 delta ${delta.latencyP99DeltaMs ?? 'n/a'} ms`,
  };
}
