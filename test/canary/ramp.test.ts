import { checkIntervalMs, rampPercents } from '../../workflows/canary';
import type { CanaryConfig } from '../../api/domain/canary';

/** The pipeline's stage plan and check cadence (pure parts of workflows/canary.ts). */

const config = (c: Partial<CanaryConfig>): CanaryConfig => ({
  initialRolloutPercent: 10,
  targetRolloutPercent: 50,
  rampStepPercent: 20,
  soakPeriodMinutes: 5,
  errorRateGateDelta: 0.01,
  latencyGateDeltaMs: 50,
  autoRollbackOnBreach: true,
  minSamplesPerCohort: 100,
  maxWaitMinutes: 50,
  alpha: 0.05,
  ...c,
});

describe('rampPercents', () => {
  it('steps from the initial to the target, the last stage exactly the target', () => {
    expect(rampPercents(config({}))).toEqual([10, 30, 50]);
    expect(rampPercents(config({ targetRolloutPercent: 100, rampStepPercent: 25 }))).toEqual([10, 35, 60, 85, 100]);
    expect(rampPercents(config({ initialRolloutPercent: 5, targetRolloutPercent: 5 }))).toEqual([5]);
    expect(rampPercents(config({ initialRolloutPercent: 1, targetRolloutPercent: 100, rampStepPercent: 200 }))).toEqual([1, 100]);
  });

  it('keeps fractional steps free of float noise', () => {
    expect(rampPercents(config({ initialRolloutPercent: 0.1, targetRolloutPercent: 0.5, rampStepPercent: 0.1 }))).toEqual([0.1, 0.2, 0.3, 0.4, 0.5]);
  });
});

describe('checkIntervalMs', () => {
  it('checks every tenth of the soak, between 1 and 10 seconds apart', () => {
    expect(checkIntervalMs(config({ soakPeriodMinutes: 0.05 }))).toBe(1_000);
    expect(checkIntervalMs(config({ soakPeriodMinutes: 1 }))).toBe(6_000);
    expect(checkIntervalMs(config({ soakPeriodMinutes: 5 }))).toBe(10_000);
  });
});
