import { randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, qs, type Project } from '../webhooks/support';

/**
 * A canary pipeline, end to end in real time on the app's own Temporal and worker: a release
 * engineer starts a canary over HTTP, real evaluations go through the evaluation API (recorded
 * with their rule and rollout side) and the service reports errors through the track API for the
 * users the canary served; the pipeline's gate sees the spike, rolls the flag back by itself and
 * leaves the evidence in the pipeline record and the audit log.
 */

let app: TestApp;
let p: Project;
let token: string;

beforeAll(async () => {
  // Writers flush often: the gate reads the warehouse every second of a 3 s soak.
  app = await startTestApp({ EVAL_EVENTS_FLUSH_MS: '200', ANALYTICS_FLUSH_MS: '200' });
  p = await createProject(app);
  token = await opaqueToken(p.owner, p.projectId, { read: true });
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

/** Evaluates the flag for `users` fresh targeting keys; the keys the canary rule served (value true). */
async function traffic(flagKey: string, users: number): Promise<string[]> {
  const served: string[] = [];
  for (let i = 0; i < users; i++) {
    const targetingKey = `u-${randomBytes(5).toString('hex')}`;
    const res = await app.request('POST', '/api/flags/evaluate', { token, body: { flagKey, serviceId: p.serviceId, environment: 'production', context: { targetingKey } } });
    expectStatus(res, 200, 'evaluate');
    if (res.body.value === true) served.push(targetingKey);
  }
  return served;
}

describe('a canary over HTTP with real traffic', () => {
  it('rolls back by itself on an error spike of the users it served, with the evidence in the record and the audit log', async () => {
    const key = `e2e-${randomBytes(3).toString('hex')}`;
    const created = await p.owner.request('POST', '/api/flags', { key, name: key, type: 'boolean', serviceId: p.serviceId, environment: 'production', enabled: true, defaultValue: false });
    expectStatus(created, 201, 'create flag');
    const started = await p.member.request('POST', `/api/flags/${key}/canary`, {
      serviceId: p.serviceId,
      initialRolloutPercent: 50,
      targetRolloutPercent: 100,
      rampStepPercent: 50,
      soakPeriodMinutes: 0.05,
      errorRateGateDelta: 0.05,
      latencyGateDeltaMs: 100,
      autoRollbackOnBreach: true,
      minSamplesPerCohort: 50,
      maxWaitMinutes: 2,
    });
    expectStatus(started, 201, 'start');
    const path = `/api/flags/${key}/canary${qs({ serviceId: p.serviceId, environment: 'production' })}`;
    expect(started.body.currentStage).toMatchObject({ index: 0, rolloutPercent: 50 });

    // Every user the canary serves fails; the control does not.
    const record = await eventually(
      async () => {
        const served = await traffic(key, 60);
        if (served.length) {
          const res = await app.request('POST', '/api/analytics/track', {
            token,
            body: { serviceId: p.serviceId, environment: 'production', events: served.map((targetingKey) => ({ event: 'error', targetingKey })) },
          });
          expectStatus(res, 202, 'track');
        }
        const current = await p.viewer.request('GET', path);
        return current.body.status === 'rolled_back' ? current.body : null;
      },
      60_000,
      0,
    );

    expect(record.statusReason).toMatch(/gate failed at 50%/);
    expect(record.health.status).toBe('breach');
    const gate = record.currentStage.gate;
    expect(gate.decision).toBe('fail');
    // Most of the served users' errors: the latest ones may still be on their way when the gate looks.
    expect(gate.treatment.errorRate).toBeGreaterThan(0.25);
    expect(gate.control.errors).toBe(0);
    expect(gate.errorRateDelta.lower).toBeGreaterThan(0.05);

    const flag = await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`);
    expect(flag.body.targeting).toEqual([]);
    const audit = await app.platform.db.sql<{ actor: string; action: string; metadata: any }[]>`
      SELECT actor, action, metadata FROM audit_logs WHERE resource_name = ${key} AND metadata ? 'canary' ORDER BY timestamp, id`;
    const pipelineActor = `canary:${started.body.id}`;
    expect(audit.map((a) => [a.action, a.actor, a.metadata.canary.action ?? a.metadata.canary.rolloutPercent ?? null])).toEqual([
      ['canary.start', p.member.email, null],
      ['flag.update', pipelineActor, 50],
      ['flag.update', pipelineActor, 'rolled_back'],
    ]);
    expect(audit[2].metadata.canary.gate.decision).toBe('fail');
  }, 90_000);
});
