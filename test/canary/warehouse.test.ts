import { randomBytes } from 'node:crypto';
import { CanaryWarehouse, type CohortScope } from '../../api/features/canary/warehouse';
import { startTestApp, type TestApp } from '../support/harness';

/**
 * The canary gate's inputs from chDB, to the unit (docs/canary.md, "What counts"): known
 * evaluation and outcome rows in and around one window, and exactly which of them count for
 * which side of the canaried rule.
 */

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);

describe('CanaryWarehouse.cohorts', () => {
  it('counts exposures by rollout side, and error and latency events attributed to a side (a failed evaluation is no error)', async () => {
    const suffix = randomBytes(3).toString('hex');
    const scope: CohortScope = {
      projectId: `prj_${suffix}`,
      serviceId: `svc_${suffix}`,
      environment: 'production',
      flagKey: 'checkout',
      ruleId: 'canary',
      treatmentValue: 'true',
      conditionsAlwaysHold: false,
    };
    const fromMs = Date.now() - 60_000;
    const toMs = fromMs + 30_000;
    const inWindow = fromMs + 1_000;
    const evaluation = (key: string, side: string, extra: Record<string, unknown> = {}) => ({
      timestamp: ts(inWindow),
      project_id: scope.projectId,
      service_id: scope.serviceId,
      environment: 'production',
      flag_key: 'checkout',
      reason: side === 'in' ? 'TARGETING_MATCH' : 'DEFAULT',
      variant: '',
      value: side === 'in' ? 'true' : 'false',
      latency_ms: 1,
      error_code: '',
      rule_id: 'canary',
      rollout_side: side,
      targeting_key_hash: key,
      source: 'rest',
      ...extra,
    });
    await app.platform.analytics.client.insert({
      table: 'evaluation_events',
      format: 'JSONEachRow',
      values: [
        ...['t1', 't2', 't3'].map((k) => evaluation(k, 'in')),
        // A failed evaluation keeps its side: an exposure, not an application error.
        evaluation('t4', 'in', { error_code: 'TYPE_MISMATCH', reason: 'ERROR' }),
        ...['c1', 'c2', 'c3', 'c4', 'c5', 'c6'].map((k) => evaluation(k, 'out')),
        // s1 was on both sides in the window; its outcome events go with the latest.
        evaluation('s1', 'out', { timestamp: ts(inWindow - 500) }),
        evaluation('s1', 'in'),
        // Not counted: another rule, no side, before the window, another service.
        evaluation('x1', 'in', { rule_id: 'other' }),
        evaluation('x2', '', { rule_id: 'canary' }),
        evaluation('x3', 'in', { timestamp: ts(fromMs - 1_000) }),
        evaluation('x4', 'in', { service_id: 'svc_other' }),
      ],
    });
    const outcome = (event: string, key: string, extra: Record<string, unknown> = {}) => ({
      timestamp: ts(inWindow + 100),
      project_id: scope.projectId,
      service_id: scope.serviceId,
      environment: 'production',
      event,
      targeting_key_hash: key,
      value: null,
      flags: {},
      origin: 'track',
      event_id: randomBytes(6).toString('hex'),
      ...extra,
    });
    await app.platform.analytics.client.insert({
      table: 'outcome_events',
      format: 'JSONEachRow',
      values: [
        outcome('error', 't1'),
        outcome('error', 's1'),
        outcome('error', 'c1'),
        outcome('latency', 't1', { value: 100 }),
        outcome('latency', 't2', { value: 200 }),
        outcome('latency', 't3', { value: 600 }),
        outcome('latency', 'c2', { value: 50 }),
        // No evaluated key, but the flags map names the flag: its value decides.
        outcome('error', 'unknown-key', { flags: { checkout: 'true' } }),
        outcome('error', '', { flags: { checkout: 'true' }, origin: 'sdk-telemetry' }),
        outcome('error', '', { flags: { checkout: 'false' }, origin: 'sdk-telemetry' }),
        // Not counted: other events, after the window, flags naming other flags, a key never evaluated.
        outcome('purchase', 't1', { value: 30 }),
        outcome('error', 't2', { timestamp: ts(toMs + 1_000) }),
        outcome('error', '', { flags: { search: 'true' } }),
        outcome('error', 'never-seen'),
      ],
    });

    const warehouse = new CanaryWarehouse(app.platform.analytics);
    const cohorts = await warehouse.cohorts(scope, fromMs, toMs);
    expect(cohorts.treatment).toEqual({
      exposures: 5,
      // Errors of t1 and s1 + the two naming the treatment value.
      errors: 4,
      latencyCount: 3,
      latencyMeanMs: 300,
      latencyVarianceMs2: 70_000,
      latencyP50Ms: 200,
      latencyP99Ms: 600,
    });
    expect(cohorts.control).toEqual({ exposures: 7, errors: 1, latencyCount: 1, latencyMeanMs: 50, latencyVarianceMs2: 0, latencyP50Ms: 50, latencyP99Ms: 50 });

    // A rule without conditions holds for everyone evaluated: another value seen is the control's.
    const unconditional = await warehouse.cohorts({ ...scope, conditionsAlwaysHold: true }, fromMs, toMs);
    expect(unconditional.treatment.errors).toBe(4);
    expect(unconditional.control.errors).toBe(2);

    // An empty window: nothing on either side.
    const empty = await warehouse.cohorts(scope, toMs + 60_000, toMs + 120_000);
    expect(empty.treatment).toEqual({ exposures: 0, errors: 0, latencyCount: 0, latencyMeanMs: 0, latencyVarianceMs2: 0, latencyP50Ms: null, latencyP99Ms: null });
  });
});
