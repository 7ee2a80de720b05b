import { evaluateAlerts } from '../../api/features/insights/alerts';
import { healthScore, levelOf } from '../../api/features/insights/health';
import { compareWindows, errorRiseSignificant, impactVerdict, rollbackDecision, windowSummary } from '../../api/features/insights/impact';
import { rolloutPercentage } from '../../api/features/insights/stale';
import type { EvaluationStats } from '../../api/features/insights/warehouse';
import { aroundChange, rangeWindow } from '../../api/features/insights/window';

/** The pure parts of the insights (docs/insights.md): windows, verdicts, scores and rules. */

const stats = (evaluations: number, errors: number, p99: number | null = 10): EvaluationStats => ({
  evaluations,
  errors,
  evaluationErrors: 0,
  latencySumMs: evaluations * 10,
  p50LatencyMs: p99,
  p95LatencyMs: p99,
  p99LatencyMs: evaluations ? p99 : null,
});

describe('windows', () => {
  it('end with the current minute and start whole minutes before', () => {
    const now = Date.UTC(2026, 10, 23, 12, 30, 45, 500);
    expect(rangeWindow('1h', now)).toMatchObject({ startMs: Date.UTC(2026, 10, 23, 11, 31), endMs: Date.UTC(2026, 10, 23, 12, 31), minutes: 60, bucketMinutes: 1 });
    expect(rangeWindow('30d', now).bucketMinutes).toBe(360);
  });

  it('split the change minute at the change, to the millisecond', () => {
    const at = Date.UTC(2026, 10, 23, 12, 30, 10, 250);
    expect(aroundChange(at, 15)).toEqual({
      before: { startMs: Date.UTC(2026, 10, 23, 12, 15, 10, 250), endMs: at },
      after: { startMs: at, endMs: Date.UTC(2026, 10, 23, 12, 45, 10, 250) },
    });
  });
});

describe('before/after verdicts', () => {
  it('count an error rise only when the z-test finds it significant', () => {
    // 1/100 -> 3/100: delta 0.02 but z ~ 1.0.
    expect(errorRiseSignificant(windowSummary(stats(100, 1)), windowSummary(stats(100, 3)))).toBe(false);
    // 10/1000 -> 30/1000: z ~ 3.2.
    expect(errorRiseSignificant(windowSummary(stats(1000, 10)), windowSummary(stats(1000, 30)))).toBe(true);
    // No baseline: the threshold decides.
    expect(errorRiseSignificant(windowSummary(stats(0, 0)), windowSummary(stats(50, 1)))).toBe(true);
  });

  it('do not trip on a noisy small sample the plain threshold would', () => {
    const before = windowSummary(stats(100, 1));
    const after = windowSummary(stats(100, 4));
    const delta = compareWindows(before, after);
    expect(delta.errorRateDelta).toBe(0.03);
    expect(rollbackDecision(before, after, delta, { maxErrorRateDelta: 0.02, maxLatencyDeltaMs: 200 }).tripped).toBe(false);
    expect(impactVerdict(before, after, delta).healthStatus).toBe('healthy');
  });

  it('judge latency on the p99 delta alone', () => {
    const before = windowSummary(stats(100, 0, 20));
    const after = windowSummary(stats(100, 0, 150));
    const delta = compareWindows(before, after);
    expect(impactVerdict(before, after, delta).healthStatus).toBe('warning');
    expect(rollbackDecision(before, after, delta, { maxErrorRateDelta: 0.02, maxLatencyDeltaMs: 100 })).toMatchObject({ tripped: true });
  });
});

describe('health score', () => {
  it('follows the documented formula', () => {
    expect(healthScore(stats(1000, 0, 10), 1000)).toMatchObject({ score: 100, status: 'healthy' });
    // 1% errors: -10; p99 150 ms: -10.
    expect(healthScore(stats(1000, 10, 150), 1000)).toMatchObject({ score: 80, status: 'degraded', breakdown: { errorPenalty: 10, latencyPenalty: 10, trafficDropPenalty: 0 } });
    // Traffic down 75% from 1000: -10; a stop: -20; a small previous hour is not judged.
    expect(healthScore(stats(250, 0), 1000).breakdown.trafficDropPenalty).toBe(10);
    expect(healthScore(stats(0, 0), 1000)).toMatchObject({ score: 80, breakdown: { trafficDropPenalty: 20 } });
    expect(healthScore(stats(0, 0), 99).score).toBe(100);
    expect(healthScore(stats(0, 0), 0).status).toBe('no_data');
  });

  it('rates services by their error rate and p99', () => {
    expect(levelOf(stats(0, 0))).toBe('idle');
    expect(levelOf(stats(10, 5))).toBe('healthy'); // too few to judge
    expect(levelOf(stats(100, 1))).toBe('degraded');
    expect(levelOf(stats(100, 0, 1000))).toBe('critical');
  });
});

describe('rollout percentage', () => {
  it('is 0 when off, the largest partial rule rollout in progress, else 100', () => {
    expect(rolloutPercentage({ enabled: false, targeting: [] })).toBe(0);
    expect(rolloutPercentage({ enabled: true, targeting: [] })).toBe(100);
    expect(
      rolloutPercentage({
        enabled: true,
        targeting: [
          { id: 'a', conditions: [], value: true, rolloutPercentage: 20 },
          { id: 'b', conditions: [], value: true, rolloutPercentage: 40 },
          { id: 'c', conditions: [], value: true, rolloutPercentage: 100 },
        ],
      }),
    ).toBe(40);
  });
});

describe('alert rules', () => {
  it('resolve when the baseline is too small to judge a drop', () => {
    const alerts = evaluateAlerts({ projectId: 'p', project: stats(0, 0), flags: [], baselineEvaluations: 1000, clientErrors: 9, baselineClientErrors: 0 });
    expect(alerts.map((a) => [a.name, a.status])).toEqual([
      ['flag_error_rate', 'resolved'],
      ['p99_latency', 'resolved'],
      ['evaluation_drop', 'resolved'], // 1000 an hour is 83 per 5 minutes: below 100
      ['client_error_spike', 'resolved'],
    ]);
  });

  it('raise the spike threshold with the baseline', () => {
    const [, , , spike] = evaluateAlerts({ projectId: 'p', project: stats(0, 0), flags: [], baselineEvaluations: 0, clientErrors: 40, baselineClientErrors: 240 });
    expect(spike).toMatchObject({ status: 'resolved', threshold: 60, value: 40 });
  });
});
