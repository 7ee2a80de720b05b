import { rateOf, round } from './impact';
import type { EvaluationStats, GroupedStats } from './warehouse';

/**
 * The alert rules GET /api/alerts evaluates on the warehouse for each of the caller's projects
 * (docs/insights.md), without I/O. Every rule yields one entry per project, `firing` or
 * `resolved`, so a dashboard sees the rule's current value even when all is well.
 */
export const ALERT_WINDOW_MINUTES = 5;
/** The baseline the drop and spike rules compare the last 5 minutes with. */
export const ALERT_BASELINE_MINUTES = 60;
const MIN_EVALUATIONS = 20;

export const ALERT_RULES = {
  flag_error_rate: { severity: 'critical', threshold: 0.05 },
  p99_latency: { severity: 'warning', threshold: 250 },
  evaluation_drop: { severity: 'warning', threshold: 0.8, minBaselinePerWindow: 100 },
  client_error_spike: { severity: 'warning', threshold: 10, baselineFactor: 3 },
} as const;
export type AlertName = keyof typeof ALERT_RULES;

export interface AlertEntry {
  name: AlertName;
  projectId: string;
  status: 'firing' | 'resolved';
  severity: 'critical' | 'warning';
  description: string;
  value: number;
  threshold: number;
}

export interface ProjectSignals {
  projectId: string;
  /** Last 5 minutes, the whole project. */
  project: EvaluationStats;
  /** Last 5 minutes, per flag. */
  flags: GroupedStats[];
  /** Evaluations in the 60 minutes before the last 5. */
  baselineEvaluations: number;
  clientErrors: number;
  baselineClientErrors: number;
}

const perWindow = (baseline: number) => (baseline * ALERT_WINDOW_MINUTES) / ALERT_BASELINE_MINUTES;

export function evaluateAlerts(s: ProjectSignals): AlertEntry[] {
  const entry = (name: AlertName, firing: boolean, value: number, threshold: number, description: string): AlertEntry => ({
    name,
    projectId: s.projectId,
    status: firing ? 'firing' : 'resolved',
    severity: ALERT_RULES[name].severity,
    description,
    value,
    threshold,
  });

  const judged = s.flags.filter((f) => f.evaluations >= MIN_EVALUATIONS);
  const worst = judged.reduce<GroupedStats | null>((w, f) => (w === null || rateOf(f.errors, f.evaluations) > rateOf(w.errors, w.evaluations) ? f : w), null);
  const worstRate = worst ? rateOf(worst.errors, worst.evaluations) : 0;
  const errorRule = ALERT_RULES.flag_error_rate;

  const p99 = s.project.evaluations >= MIN_EVALUATIONS ? (s.project.p99LatencyMs ?? 0) : 0;
  const latencyRule = ALERT_RULES.p99_latency;

  const dropRule = ALERT_RULES.evaluation_drop;
  const expected = perWindow(s.baselineEvaluations);
  const drop = expected >= dropRule.minBaselinePerWindow ? Math.max(0, 1 - s.project.evaluations / expected) : 0;

  const spikeRule = ALERT_RULES.client_error_spike;
  const spikeThreshold = Math.max(spikeRule.threshold, Math.ceil(spikeRule.baselineFactor * perWindow(s.baselineClientErrors)));

  return [
    entry(
      'flag_error_rate',
      worstRate > errorRule.threshold,
      round(worstRate, 6),
      errorRule.threshold,
      worst
        ? `Highest flag error rate over the last ${ALERT_WINDOW_MINUTES} minutes: ${worst.flagKey} (${worst.serviceId}, ${worst.environment}) ${round(worstRate * 100, 2)}% of ${worst.evaluations} evaluations`
        : `No flag had ${MIN_EVALUATIONS} evaluations over the last ${ALERT_WINDOW_MINUTES} minutes`,
    ),
    entry('p99_latency', p99 > latencyRule.threshold, round(p99), latencyRule.threshold, `p99 evaluation latency over the last ${ALERT_WINDOW_MINUTES} minutes, all flags of the project`),
    entry(
      'evaluation_drop',
      drop > dropRule.threshold,
      round(drop, 4),
      dropRule.threshold,
      `Fall of evaluations in the last ${ALERT_WINDOW_MINUTES} minutes (${s.project.evaluations}) against the average ${ALERT_WINDOW_MINUTES} minutes of the hour before (${round(expected, 1)}); judged from ${dropRule.minBaselinePerWindow} expected`,
    ),
    entry(
      'client_error_spike',
      s.clientErrors >= spikeThreshold,
      s.clientErrors,
      spikeThreshold,
      `Client errors (SDK and browser) in the last ${ALERT_WINDOW_MINUTES} minutes; fires at ${spikeRule.threshold} or ${spikeRule.baselineFactor}x the hour before's average (${round(perWindow(s.baselineClientErrors), 1)}), whichever is higher`,
    ),
  ];
}
