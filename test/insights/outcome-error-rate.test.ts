import { randomBytes } from 'node:crypto';
import { AutoRollbackResponse, MetricsResponse, ToggleImpactResponse } from '../../api/features/insights/schemas';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, opaqueToken, qs, type Project } from '../webhooks/support';

/**
 * One meaning of error rate (docs/insights.md#error-rate) and exact windows, over HTTP against
 * real Postgres, Temporal and chDB: users are evaluated through the evaluation API and the
 * application reports their errors through the track API; flag metrics, toggle impact,
 * auto-rollback and the production guardrail all count those, and the windows around a toggle
 * start at its millisecond, so nothing waits for a minute boundary.
 */

const MINUTE = 60_000;
jest.setTimeout(6 * MINUTE);

let app: TestApp;
let p: Project;
let token: string;

beforeAll(async () => {
  // Writers flush often: the answers are read seconds after the traffic.
  app = await startTestApp({ EVAL_EVENTS_FLUSH_MS: '200', ANALYTICS_FLUSH_MS: '200' });
  p = await createProject(app);
  token = await opaqueToken(p.owner, p.projectId, { read: true });
  const patched = await p.admin.request('PATCH', `/api/projects/${p.projectId}`, { guardrailWindowMinutes: 1, guardrailAutoRollback: true });
  expectStatus(patched, 200, 'guardrail settings');
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

const newKey = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;
const users = (n: number) => Array.from({ length: n }, () => `u-${randomBytes(5).toString('hex')}`);
const flagQuery = (extra: Record<string, string | number> = {}) => qs({ serviceId: p.serviceId, environment: 'production', ...extra });
const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);

async function evaluate(flagKey: string, targetingKeys: string[]) {
  // A flag just created reaches the evaluating snapshot over the bus; an evaluation before that
  // would be a failed one (FLAG_NOT_FOUND), counted apart from the outcomes these tests judge.
  await eventually(async () => (await app.platform.evaluation!.snapshots.resolve(p.serviceId))?.environments.production.get(flagKey) !== undefined, 30_000);
  for (const targetingKey of targetingKeys) {
    const res = await app.request('POST', '/api/flags/evaluate', { token, body: { flagKey, serviceId: p.serviceId, environment: 'production', context: { targetingKey } } });
    expectStatus(res, 200, 'evaluate');
  }
}

async function reportErrors(targetingKeys: string[]) {
  const res = await app.request('POST', '/api/analytics/track', {
    token,
    body: { serviceId: p.serviceId, environment: 'production', events: targetingKeys.map((targetingKey) => ({ event: 'error', targetingKey })) },
  });
  expectStatus(res, 202, 'track');
  expect(res.body).toMatchObject({ accepted: targetingKeys.length, rejected: 0 });
}

/** Switches the flag on; its id and the toggle's time. */
async function toggleOn(flagKey: string): Promise<{ id: string; at: number }> {
  const res = await p.member.request('POST', `/api/flags/${flagKey}/toggle${flagQuery()}`, { enabled: true });
  expectStatus(res, 200, 'toggle');
  const history = await p.owner.request('GET', `/api/flags/${flagKey}/history${flagQuery()}`);
  return { id: res.body.id, at: Date.parse(history.body.versions[0].createdAt) };
}

describe('error rate is application outcomes', () => {
  it('100 users after a toggle, 14 report an error: metrics, toggle impact and auto-rollback say 14%, and the guardrail rolls back', async () => {
    const key = newKey('fourteen');
    await createFlag(p.owner, p.serviceId, key);
    const { id } = await toggleOn(key);
    const after = users(100);
    await evaluate(key, after);
    await reportErrors(after.slice(0, 14));

    const metrics = await eventually(async () => {
      const res = await p.viewer.request('GET', `/api/flags/${key}/metrics${flagQuery({ range: '1h' })}`);
      expectStatus(res, 200, 'metrics');
      return res.body.summary.totalEvaluations === 100 && res.body.summary.totalErrors === 14 && res.body;
    }, 30_000);
    expect(MetricsResponse.safeParse(metrics).success).toBe(true);
    expect(metrics.summary).toMatchObject({ totalEvaluations: 100, totalErrors: 14, errorRate: 0.14, evaluationErrors: 0 });
    expect(metrics.toggleImpact.after).toMatchObject({ evaluations: 100, errors: 14, errorRate: 0.14 });
    expect(metrics.timeSeries.reduce((n: number, b: { errors: number }) => n + b.errors, 0)).toBe(14);

    const impact = await p.viewer.request('GET', `/api/flags/${key}/toggle-impact${flagQuery()}`);
    expectStatus(impact, 200, 'toggle impact');
    expect(ToggleImpactResponse.safeParse(impact.body).success).toBe(true);
    expect(impact.body.impact).toMatchObject({ healthStatus: 'degraded', after: { evaluations: 100, errors: 14, errorRate: 0.14 }, delta: { errorRateDelta: 0.14 } });

    const judged = await p.viewer.request('GET', `/api/flags/${key}/auto-rollback${flagQuery()}`);
    expectStatus(judged, 200, 'auto-rollback');
    expect(AutoRollbackResponse.safeParse(judged.body).success).toBe(true);
    expect(judged.body).toMatchObject({ actionTaken: 'would_roll_back', tripped: true, after: { evaluations: 100, errors: 14, errorRate: 0.14 } });
    expect(judged.body.reason).toMatch(/0% -> 14%/);

    // The production guardrail's watch (1-minute window from the toggle) judges the same numbers and rolls back.
    const verdict = await eventually(
      async () => {
        const res = await p.owner.request('GET', `/api/audit${qs({ projectId: p.projectId, resourceId: id, action: 'guardrail.checked' })}`);
        return res.body.logs?.[0];
      },
      4 * MINUTE,
      1_000,
    );
    expect(verdict.metadata).toMatchObject({ verdict: 'rolled_back', after: { evaluations: 100, errors: 14, errorRate: 0.14 } });
    const flag = await p.owner.request('GET', `/api/flags/${key}${flagQuery()}`);
    expect(flag.body).toMatchObject({ enabled: false, version: 3 });
  });

  it('reports failed evaluations apart, never as errors', async () => {
    const key = newKey('apart');
    await createFlag(p.owner, p.serviceId, key);
    const evaluated = users(20);
    await evaluate(key, evaluated);
    await reportErrors(evaluated.slice(0, 2));
    const failed = Array.from({ length: 6 }, (_, i) => ({
      timestamp: ts(Date.now() - 1_000),
      project_id: p.projectId,
      service_id: p.serviceId,
      environment: 'production',
      flag_key: key,
      reason: 'ERROR',
      variant: '',
      value: 'false',
      latency_ms: 1,
      error_code: 'TYPE_MISMATCH',
      targeting_key_hash: `failed-${i}`,
      source: 'rest',
    }));
    await app.platform.analytics.client.insert({ table: 'evaluation_events', values: failed, format: 'JSONEachRow' });
    const summary = await eventually(async () => {
      const res = await p.viewer.request('GET', `/api/flags/${key}/metrics${flagQuery({ range: '1h' })}`);
      if (res.body.summary?.totalEvaluations === 26 && res.body.summary.totalErrors === 2) return res.body.summary;
      // Said when the bound runs out: what the last read answered.
      throw new Error(`${res.status} ${JSON.stringify(res.body.summary ?? res.body)}`);
    }, 90_000);
    expect(summary).toMatchObject({ totalEvaluations: 26, totalErrors: 2, evaluationErrors: 6 });
    expect(summary.errorRate).toBeCloseTo(2 / 26, 6);
  });
});

describe('exact windows around a toggle', () => {
  it('toggle, 100 evaluations and 50 errors within seconds: before 100/0, after 100/50, no minute boundary awaited', async () => {
    const key = newKey('exact');
    await createFlag(p.owner, p.serviceId, key);
    const before = users(100);
    await evaluate(key, before);
    const { at } = await toggleOn(key);
    const after = users(100);
    await evaluate(key, after);
    await reportErrors(after.slice(0, 50));

    const impact = await eventually(async () => {
      const res = await p.viewer.request('GET', `/api/flags/${key}/toggle-impact${flagQuery()}`);
      const i = res.body.impact;
      return i?.before?.evaluations === 100 && i.after?.evaluations === 100 && i.after.errors === 50 && i;
    }, 20_000, 200);
    expect(impact.before).toMatchObject({ evaluations: 100, errors: 0, errorRate: 0, end: new Date(at).toISOString() });
    expect(impact.after).toMatchObject({ evaluations: 100, errors: 50, errorRate: 0.5, start: new Date(at).toISOString() });

    const judged = await p.viewer.request('GET', `/api/flags/${key}/auto-rollback${flagQuery()}`);
    expect(judged.body).toMatchObject({ actionTaken: 'would_roll_back', before: { evaluations: 100, errors: 0 }, after: { evaluations: 100, errors: 50, errorRate: 0.5 } });
  });
});
