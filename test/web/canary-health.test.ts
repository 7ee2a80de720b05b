import { canaryHealth, gateState } from '../../web/src/components/releases/health';
import type { CanaryGate, CanaryRecord } from '../../web/src/components/releases/types';

/** The canary pages' one health vocabulary (docs/canary.md#in-the-console), from a record and its latest gate. */

const config = {
  initialRolloutPercent: 10,
  rampStepPercent: 20,
  targetRolloutPercent: 50,
  soakPeriodMinutes: 5,
  errorRateGateDelta: 0.01,
  latencyGateDeltaMs: 100,
  minSamplesPerCohort: 100,
  alpha: 0.05,
  autoRollbackOnBreach: true,
  maxWaitMinutes: 50,
} as CanaryRecord['config'];

const cohort = (exposures: number) => ({ exposures, errors: 0, errorRate: 0, latencyP50: null, latencyP99: null });

function gate(decision: CanaryGate['decision'], treatment: number, control: number, extra: Partial<CanaryGate> = {}): CanaryGate {
  return {
    decision,
    reason: decision,
    test: 'two-proportion z-test',
    alpha: 0.05,
    treatment: cohort(treatment),
    control: cohort(control),
    errorRateDelta: { estimate: 0, lower: 0, upper: 0 },
    latencyDeltaMs: { estimate: null, lower: null, upper: null },
    srm: { pValue: 0.5, ok: true },
    ...extra,
  } as CanaryGate;
}

const STAGE_START = '2026-11-27T12:00:00.000Z';
const CHECKED = '2026-11-27T12:03:00.000Z';

function record(status: CanaryRecord['status'], latest?: CanaryGate, checkedAt = CHECKED): CanaryRecord {
  return {
    status,
    config,
    currentStage: { index: 0, rolloutPercent: 10, startedAt: STAGE_START },
    completedStages: [],
    health: { status: 'pending', checkedAt: latest ? checkedAt : null, gate: latest ?? null },
  } as unknown as CanaryRecord;
}

describe('gateState', () => {
  it.each([
    ['pass', gate('pass', 500, 500), 'passing'],
    ['fail', gate('fail', 500, 500), 'failing'],
    ['wait with too few exposures', gate('wait', 22, 25), 'waiting'],
    ['wait with a split mismatch', gate('wait', 500, 500, { srm: { pValue: 0.0001, ok: false } }), 'waiting'],
    ['wait with a guard not judged', gate('wait', 500, 500, { guards: [{ name: 'p99', decision: 'wait', reason: 'no data', value: null }] } as Partial<CanaryGate>), 'waiting'],
    ['wait mid-soak with enough data', gate('wait', 500, 500), 'passing'],
  ])('%s', (_case, g, state) => {
    expect(gateState(g, config)).toBe(state);
  });
});

describe('canaryHealth', () => {
  it('waits for data, with the counts and time of the check it names', () => {
    const latest = gate('wait', 22, 25);
    const view = canaryHealth(record('running', latest));
    expect(view).toMatchObject({ state: 'waiting', label: 'Waiting for data', evidence: { gate: latest, checkedAt: CHECKED } });
    expect(view.explanation).toBe('Fewer than 100 exposures in a cohort: the gate cannot decide yet, so the stage keeps soaking.');
  });

  it('says a paused pipeline waited past its limit, and a paused breach waits for a person', () => {
    expect(canaryHealth(record('paused', gate('wait', 22, 25))).explanation).toBe('Fewer than 100 exposures in a cohort: past the wait limit, paused until someone advances or aborts.');
    expect(canaryHealth(record('paused', gate('fail', 500, 500)))).toMatchObject({ state: 'failing', explanation: 'The gate found harm beyond its limits: paused until someone advances or aborts.' });
  });

  it('ignores a check from before the current stage started', () => {
    expect(canaryHealth(record('running', gate('pass', 500, 500), '2026-11-27T11:59:00.000Z'))).toMatchObject({ state: 'not_checked', evidence: undefined });
    expect(canaryHealth(record('running'))).toMatchObject({ state: 'not_checked', label: 'Not checked yet' });
  });

  it('names an ended pipeline by how it ended, whatever its last gate said', () => {
    expect(canaryHealth(record('aborted', gate('wait', 22, 25))).label).toBe('Aborted');
    expect(canaryHealth(record('rolled_back', gate('fail', 500, 500))).label).toBe('Rolled back');
    expect(canaryHealth(record('completed', gate('pass', 500, 500))).explanation).toBe('Every stage passed: the rule serves 50% of its users.');
  });
});
