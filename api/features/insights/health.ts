import { rateOf, round } from './impact';
import type { EvaluationStats, GroupedStats } from './warehouse';

/**
 * Project health (docs/insights.md), without I/O: a score 0-100 over the last hour of
 * evaluations, a status per service and the worst flags.
 *
 * score = 100 - errorPenalty - latencyPenalty - trafficDropPenalty, rounded and kept in 0-100:
 * - errorPenalty = min(50, 1000 x error rate): 1% of errors costs 10 points, 5% costs all 50;
 * - latencyPenalty = min(30, (p99 ms - 50) / 10) when p99 is above 50 ms: 350 ms costs all 30;
 * - trafficDropPenalty = min(20, 40 x (drop - 0.5)) when evaluations fell by more than half
 *   against the hour before (and that hour had at least 100): a stop costs all 20.
 */
export const HEALTH_WINDOW_MINUTES = 60;
/** Below this many evaluations a flag or service is not judged on its rates. */
export const MIN_JUDGED_EVALUATIONS = 20;
export const SERVICE_THRESHOLDS = {
  degraded: { errorRate: 0.01, p99LatencyMs: 250 },
  critical: { errorRate: 0.05, p99LatencyMs: 1000 },
} as const;
const MAX_ISSUES = 10;

export type HealthLevel = 'healthy' | 'degraded' | 'critical' | 'idle';

export function healthScore(current: EvaluationStats, previousEvaluations: number) {
  const errorRate = rateOf(current.errors, current.evaluations);
  const errorPenalty = Math.min(50, errorRate * 1000);
  const latencyPenalty = current.p99LatencyMs === null ? 0 : Math.min(30, Math.max(0, current.p99LatencyMs - 50) / 10);
  const drop = previousEvaluations >= 100 ? 1 - current.evaluations / previousEvaluations : 0;
  const trafficDropPenalty = Math.min(20, Math.max(0, drop - 0.5) * 40);
  const score = Math.max(0, Math.min(100, Math.round(100 - errorPenalty - latencyPenalty - trafficDropPenalty)));
  const status = current.evaluations === 0 && previousEvaluations === 0 ? 'no_data' : score >= 90 ? 'healthy' : score >= 70 ? 'degraded' : 'critical';
  return {
    score,
    status,
    breakdown: { errorPenalty: round(errorPenalty, 2), latencyPenalty: round(latencyPenalty, 2), trafficDropPenalty: round(trafficDropPenalty, 2) },
  };
}

export function levelOf(stats: EvaluationStats): HealthLevel {
  if (stats.evaluations === 0) return 'idle';
  if (stats.evaluations < MIN_JUDGED_EVALUATIONS) return 'healthy';
  const errorRate = rateOf(stats.errors, stats.evaluations);
  const p99 = stats.p99LatencyMs ?? 0;
  if (errorRate >= SERVICE_THRESHOLDS.critical.errorRate || p99 >= SERVICE_THRESHOLDS.critical.p99LatencyMs) return 'critical';
  if (errorRate >= SERVICE_THRESHOLDS.degraded.errorRate || p99 >= SERVICE_THRESHOLDS.degraded.p99LatencyMs) return 'degraded';
  return 'healthy';
}

export interface HealthIssue {
  type: 'error_rate' | 'latency';
  severity: 'critical' | 'warning';
  serviceId: string;
  environment: string;
  flagKey: string;
  value: number;
  threshold: number;
  evaluations: number;
  message: string;
}

/** Flags over the degraded thresholds, critical first, then by how far over they are. */
export function degradationIssues(flags: GroupedStats[]): HealthIssue[] {
  const issues: (HealthIssue & { excess: number })[] = [];
  for (const f of flags) {
    if (f.evaluations < MIN_JUDGED_EVALUATIONS) continue;
    const where = { serviceId: f.serviceId, environment: f.environment, flagKey: f.flagKey, evaluations: f.evaluations };
    const measured = [
      { type: 'error_rate' as const, value: rateOf(f.errors, f.evaluations), degraded: SERVICE_THRESHOLDS.degraded.errorRate, critical: SERVICE_THRESHOLDS.critical.errorRate },
      { type: 'latency' as const, value: f.p99LatencyMs, degraded: SERVICE_THRESHOLDS.degraded.p99LatencyMs, critical: SERVICE_THRESHOLDS.critical.p99LatencyMs },
    ];
    for (const { type, value, degraded, critical } of measured) {
      if (value === null || value < degraded) continue;
      const threshold = value >= critical ? critical : degraded;
      const shown = type === 'error_rate' ? `${round(value * 100, 2)}% errors over ${f.evaluations} evaluations` : `p99 latency ${round(value, 1)} ms`;
      issues.push({
        type,
        severity: value >= critical ? 'critical' : 'warning',
        ...where,
        value: round(value, type === 'error_rate' ? 6 : 3),
        threshold,
        excess: value / threshold,
        message: `${f.flagKey} (${f.environment}): ${shown}`,
      });
    }
  }
  issues.sort((a, b) => (a.severity === b.severity ? b.excess - a.excess : a.severity === 'critical' ? -1 : 1));
  return issues.slice(0, MAX_ISSUES).map(({ excess: _excess, ...issue }) => issue);
}
