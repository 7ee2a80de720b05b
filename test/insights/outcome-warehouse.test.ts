import { randomBytes } from 'node:crypto';
import { EvaluationWarehouse } from '../../api/features/insights/warehouse';
import { eventually, startTestApp, type TestApp } from '../support/harness';

/**
 * The insights' warehouse reads on rows put straight into chDB (docs/insights.md#error-rate):
 * windows to the millisecond over the rollup and the raw rows, and application errors counted
 * per flag, service and project by the one outcome query.
 */

const MINUTE = 60_000;
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);

describe('exact windows', () => {
  it('count the rollup for whole minutes and the raw rows at each edge, to the millisecond', async () => {
    const scope = { projectId: `prj_${randomBytes(4).toString('hex')}`, serviceId: 'svc_exact', environment: 'production', flagKey: 'exact' };
    const minute = Math.floor(Date.now() / MINUTE) * MINUTE - 20 * MINUTE;
    const at = minute + 30_500;
    const window = 3 * MINUTE;
    const evaluation = (key: string, ms: number, extra: Record<string, unknown> = {}) => ({
      timestamp: ts(ms),
      project_id: scope.projectId,
      service_id: scope.serviceId,
      environment: 'production',
      flag_key: 'exact',
      reason: 'STATIC',
      variant: '',
      value: 'true',
      latency_ms: 5,
      error_code: '',
      targeting_key_hash: key,
      source: 'rest',
      ...extra,
    });
    await app.platform.analytics.client.insert({
      table: 'evaluation_events',
      format: 'JSONEachRow',
      values: [
        evaluation('out-early', at - window - 1),
        evaluation('b-edge-start', at - window),
        evaluation('b-whole', minute - 2 * MINUTE + 5_000, { latency_ms: 50 }),
        evaluation('b-whole-failed', minute - MINUTE + 5_000, { error_code: 'GENERAL', reason: 'ERROR' }),
        evaluation('b-edge-end', at - 1),
        evaluation('a-edge-start', at),
        evaluation('a-whole', minute + MINUTE + 1_000, { latency_ms: 900 }),
        evaluation('a-edge-end', at + window - 1),
        evaluation('out-late', at + window),
      ],
    });
    const outcome = (key: string, ms: number) => ({
      timestamp: ts(ms),
      project_id: scope.projectId,
      service_id: scope.serviceId,
      environment: 'production',
      event: 'error',
      targeting_key_hash: key,
      value: null,
      flags: {},
      origin: 'track',
      event_id: randomBytes(6).toString('hex'),
    });
    await app.platform.analytics.client.insert({
      table: 'outcome_events',
      format: 'JSONEachRow',
      values: [outcome('b-edge-end', at - 1), outcome('a-edge-start', at), outcome('a-whole', at + 10), outcome('out-late', at + window)],
    });

    const warehouse = new EvaluationWarehouse(app.platform.analytics);
    // Inserted rows may take a moment to be visible to a query from another connection.
    const beforeStats = await eventually(async () => {
      const stats = await warehouse.flagStats(scope, { startMs: at - window, endMs: at });
      return stats.evaluations > 0 && stats;
    }, 10_000);
    const afterStats = await warehouse.flagStats(scope, { startMs: at, endMs: at + window });
    expect(beforeStats).toMatchObject({ evaluations: 4, errors: 1, evaluationErrors: 1, latencySumMs: 5 + 50 + 5 + 5, p99LatencyMs: 50 });
    expect(afterStats).toMatchObject({ evaluations: 3, errors: 2, evaluationErrors: 0, latencySumMs: 5 + 900 + 5, p99LatencyMs: 900 });
    // Within one minute: the raw rows alone.
    expect(await warehouse.flagStats(scope, { startMs: at - 1, endMs: at + 1 })).toMatchObject({ evaluations: 2, errors: 2 });
  });
});

describe('project health and alerts', () => {
  it('count an error once per flag its user was evaluated by, and once for the service and the project', async () => {
    const projectId = `prj_${randomBytes(4).toString('hex')}`;
    const now = Date.now();
    const evaluation = (serviceId: string, flagKey: string, key: string) => ({
      timestamp: ts(now - 10_000),
      project_id: projectId,
      service_id: serviceId,
      environment: 'production',
      flag_key: flagKey,
      reason: 'STATIC',
      variant: '',
      value: 'true',
      latency_ms: 1,
      error_code: '',
      targeting_key_hash: key,
      source: 'rest',
    });
    await app.platform.analytics.client.insert({
      table: 'evaluation_events',
      format: 'JSONEachRow',
      values: [evaluation('svc_a', 'one', 'both'), evaluation('svc_a', 'two', 'both'), evaluation('svc_a', 'two', 'calm'), evaluation('svc_b', 'one', 'both')],
    });
    const error = (serviceId: string, key: string, flags: Record<string, string> = {}) => ({
      timestamp: ts(now - 5_000),
      project_id: projectId,
      service_id: serviceId,
      environment: 'production',
      event: 'error',
      targeting_key_hash: key,
      value: null,
      flags,
      origin: 'track',
      event_id: randomBytes(6).toString('hex'),
    });
    // `both` fails once in svc_a (evaluated by one and two there); a key nobody evaluated names `two`; a stranger counts nowhere.
    await app.platform.analytics.client.insert({
      table: 'outcome_events',
      format: 'JSONEachRow',
      values: [error('svc_a', 'both'), error('svc_a', 'unseen', { two: 'true' }), error('svc_a', 'stranger')],
    });
    const warehouse = new EvaluationWarehouse(app.platform.analytics);
    const window = { startMs: Math.floor(now / MINUTE) * MINUTE - 5 * MINUTE, endMs: Math.floor(now / MINUTE) * MINUTE + MINUTE };
    const grouped = await eventually(async () => {
      const rows = await warehouse.groupedStats([projectId], window);
      return rows.some((r) => r.level === 'project' && r.evaluations === 4) && rows;
    }, 10_000);
    const errorsOf = (level: string, serviceId = '', flagKey = '') =>
      grouped.find((r) => r.level === level && (level === 'project' || r.serviceId === serviceId) && (level !== 'flag' || r.flagKey === flagKey))?.errors;
    expect(errorsOf('flag', 'svc_a', 'one')).toBe(1);
    expect(errorsOf('flag', 'svc_a', 'two')).toBe(2);
    expect(errorsOf('flag', 'svc_b', 'one')).toBe(0);
    expect(errorsOf('service', 'svc_a')).toBe(2);
    expect(errorsOf('service', 'svc_b')).toBe(0);
    expect(errorsOf('project')).toBe(2);
  });
});
