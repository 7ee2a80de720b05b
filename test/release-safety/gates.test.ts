import cases from './fixtures/gate-cases.json';
import { evaluateGate, GATE_TEST_NAME, SRM_P_VALUE, SRM_REASON, type CohortSummary, type GateConfig } from '../../api/lib/release-safety/gates';

/** Expected decisions and intervals: test/release-safety/fixtures/make_fixtures.py (scipy). */

const config: GateConfig = { alpha: 0.05, minSamplesPerCohort: 100, errorRateGateDelta: 0, latencyGateDeltaMs: 0, treatmentShare: 0.1 };
const cohort = (exposures: number, errors: number, latency?: { count: number; mean: number; variance: number }): CohortSummary => ({
  exposures,
  errors,
  latencyCount: latency?.count ?? 0,
  latencyMeanMs: latency?.mean ?? 0,
  latencyVarianceMs2: latency?.variance ?? 0,
  latencyP50Ms: latency ? latency.mean * 0.8 : null,
  latencyP99Ms: latency ? latency.mean * 5 : null,
});

describe('evaluateGate against the scipy reference', () => {
  it.each(cases)('$name', ({ treatment, control, config: caseConfig, final, expected }) => {
    const gate = evaluateGate(treatment, control, caseConfig, { final });
    expect(gate.decision).toBe(expected.decision);
    expect(gate.errorRateDelta.estimate).toBeCloseTo(expected.errorRateDelta.estimate, 12);
    expect(Math.abs(gate.errorRateDelta.lower - expected.errorRateDelta.lower)).toBeLessThan(1e-8);
    expect(Math.abs(gate.errorRateDelta.upper - expected.errorRateDelta.upper)).toBeLessThan(1e-8);
    for (const key of ['estimate', 'lower', 'upper'] as const) {
      const want = expected.latencyDeltaMs[key];
      if (want === null) expect(gate.latencyDeltaMs[key]).toBeNull();
      else expect(Math.abs((gate.latencyDeltaMs[key] ?? NaN) - want)).toBeLessThan(1e-7);
    }
    expect(Math.abs(gate.srm.pValue - expected.srmPValue)).toBeLessThanOrEqual(1e-10 * Math.max(expected.srmPValue, 1e-30));
    expect(gate.srm.ok).toBe(expected.srmPValue >= SRM_P_VALUE);
  });
});

describe('evaluateGate rules', () => {
  it('returns the documented gate shape with the cohorts as evidence', () => {
    const gate = evaluateGate(cohort(1000, 10, { count: 1000, mean: 170, variance: 40_000 }), cohort(9000, 90, { count: 9000, mean: 165, variance: 40_000 }), config, { final: true });
    expect(gate).toEqual({
      decision: 'pass',
      reason: 'no harm shown in error rate or latency',
      test: GATE_TEST_NAME,
      alpha: 0.05,
      treatment: { exposures: 1000, errors: 10, errorRate: 0.01, latencyP50: 136, latencyP99: 850 },
      control: { exposures: 9000, errors: 90, errorRate: 0.01, latencyP50: 132, latencyP99: 825 },
      errorRateDelta: { estimate: 0, lower: expect.any(Number), upper: expect.any(Number) },
      latencyDeltaMs: { estimate: 5, lower: expect.any(Number), upper: expect.any(Number) },
      srm: { pValue: 1, ok: true },
    });
    expect(gate.errorRateDelta.lower).toBeLessThan(0);
    expect(gate.errorRateDelta.upper).toBeGreaterThan(0);
    expect(gate.latencyDeltaMs.lower!).toBeLessThan(5);
    expect(gate.latencyDeltaMs.upper!).toBeGreaterThan(5);
  });

  it('never passes during the soak, however clean the data', () => {
    const gate = evaluateGate(cohort(100_000, 0), cohort(900_000, 9000), config, { final: false });
    expect(gate.decision).toBe('wait');
    expect(gate.reason).toBe('soaking: no harm shown yet');
  });

  it('waits on too little data, naming the counts, even when the treatment looks bad', () => {
    const gate = evaluateGate(cohort(99, 50), cohort(900, 5), config, { final: true });
    expect(gate.decision).toBe('wait');
    expect(gate.reason).toBe('too little data: 99 treatment and 900 control exposures, 100 per side needed');
  });

  it('a broken split blocks a failure as well as a pass', () => {
    const failing = evaluateGate(cohort(2000, 400), cohort(8000, 80), config, { final: false });
    expect(failing).toMatchObject({ decision: 'wait', reason: SRM_REASON, srm: { ok: false } });
    expect(failing.errorRateDelta.lower).toBeGreaterThan(0);
    expect(evaluateGate(cohort(2000, 20), cohort(8000, 80), config, { final: true }).reason).toBe(SRM_REASON);
  });

  it('fails on the error rate and says by how much', () => {
    const gate = evaluateGate(cohort(3000, 90), cohort(27000, 270), config, { final: false });
    expect(gate.decision).toBe('fail');
    expect(gate.reason).toMatch(/^error rate: treatment - control is at least 0\.0\d+, above the tolerated 0$/);
  });

  it('fails on latency only with enough latency samples on both sides', () => {
    const slow = { count: 1000, mean: 300, variance: 100 };
    const fast = { count: 9000, mean: 100, variance: 100 };
    expect(evaluateGate(cohort(1000, 10, slow), cohort(9000, 90, fast), config, { final: false }).reason).toMatch(/^latency: treatment - control is at least 19\d(\.\d+)? ms, above the tolerated 0 ms$/);
    const sparse = evaluateGate(cohort(1000, 10, { ...slow, count: 50 }), cohort(9000, 90, fast), config, { final: false });
    expect(sparse.decision).toBe('wait');
    expect(sparse.latencyDeltaMs.lower!).toBeGreaterThan(0);
  });

  it('at the end of the soak waits for latency that is reported but too sparse', () => {
    const gate = evaluateGate(cohort(1000, 10, { count: 50, mean: 100, variance: 100 }), cohort(9000, 90, { count: 450, mean: 100, variance: 100 }), config, { final: true });
    expect(gate).toMatchObject({ decision: 'wait', reason: 'too little latency data: 50 treatment and 450 control samples, 100 per side needed' });
  });

  it('gates on errors alone when no latency is reported, with no latency interval', () => {
    const gate = evaluateGate(cohort(1000, 10), cohort(9000, 90), config, { final: true });
    expect(gate).toMatchObject({ decision: 'pass', reason: 'no harm shown in error rate (no latency reported)', latencyDeltaMs: { estimate: null, lower: null, upper: null } });
  });

  it('caps errors at exposures: a rate never exceeds 1', () => {
    const gate = evaluateGate(cohort(200, 500), cohort(1800, 18), config, { final: false });
    expect(gate.treatment).toMatchObject({ errors: 200, errorRate: 1 });
    expect(gate.errorRateDelta.upper).toBeLessThanOrEqual(1);
    expect(gate.decision).toBe('fail');
  });

  it('keeps the interval inside [-1, 1] and around the estimate with no data at all', () => {
    const gate = evaluateGate(cohort(0, 0), cohort(0, 0), config, { final: true });
    expect(gate).toMatchObject({ decision: 'wait', errorRateDelta: { estimate: 0, lower: -1, upper: 1 }, srm: { pValue: 1, ok: true } });
  });

  it('tightens as data accumulate at the same rates', () => {
    const widths = [1, 4, 16].map((k) => {
      const { lower, upper } = evaluateGate(cohort(1000 * k, 10 * k), cohort(9000 * k, 90 * k), config, { final: false }).errorRateDelta;
      return upper - lower;
    });
    expect(widths[1]).toBeLessThan(widths[0]);
    expect(widths[2]).toBeLessThan(widths[1]);
  });

  it('a stricter alpha widens the interval', () => {
    const loose = evaluateGate(cohort(2000, 40), cohort(18000, 180), config, { final: false });
    const strict = evaluateGate(cohort(2000, 40), cohort(18000, 180), { ...config, alpha: 0.01 }, { final: false });
    expect(strict.alpha).toBe(0.01);
    expect(strict.errorRateDelta.lower).toBeLessThan(loose.errorRateDelta.lower);
    expect(strict.errorRateDelta.upper).toBeGreaterThan(loose.errorRateDelta.upper);
  });
});
