import { randomBytes } from 'node:crypto';
import { startTestApp, type TestApp } from '../support/harness';
import { GUARD_METRIC, requirePrometheus, startFixtureExporter, type FixtureExporter } from '../support/prometheus';
import { createProject, expectStatus, opaqueToken, qs, type Project } from '../webhooks/support';

/**
 * Prometheus guards on a canary, over HTTP in real time on the app's own Temporal and worker,
 * against the real Prometheus of scripts/test-infra.sh scraping a fixture exporter: real
 * evaluations keep both cohorts healthy, so what the guard answers decides the gate.
 */

let app: TestApp;
let p: Project;
let token: string;
let exporter: FixtureExporter;
const prometheus = requirePrometheus();

beforeAll(async () => {
  exporter = await startFixtureExporter();
  // runUntil's traffic spends a default minute's budget of the token (5,000) in seconds: the
  // stage after would see no traffic until the minute ends.
  const budgets = { RATE_LIMIT_PER_IP: '1000000', RATE_LIMIT_PER_TOKEN: '1000000', RATE_LIMIT_PER_SERVICE: '1000000' };
  app = await startTestApp({ EVAL_EVENTS_FLUSH_MS: '200', ANALYTICS_FLUSH_MS: '200', PROMETHEUS_URL_ALLOWLIST: prometheus.url, ...budgets });
  p = await createProject(app);
  token = await opaqueToken(p.owner, p.projectId, { read: true });
}, 60_000);
afterAll(async () => {
  await app?.stop();
  await exporter?.close();
});

const guard = (extra: Record<string, unknown> = {}) => ({
  name: 'app errors',
  source: 'prometheus',
  url: prometheus.url,
  query: `max(${GUARD_METRIC}{flag_key="{{flagKey}}"})`,
  failWhen: { op: '>', threshold: 0.05 },
  ...extra,
});

/** One stage at 50%: healthy traffic lets it pass at the end of its 3 s soak unless a guard objects. */
const config = (guards: unknown[], extra: Record<string, unknown> = {}) => ({
  serviceId: p.serviceId,
  initialRolloutPercent: 50,
  targetRolloutPercent: 50,
  rampStepPercent: 50,
  soakPeriodMinutes: 0.05,
  errorRateGateDelta: 0.05,
  latencyGateDeltaMs: 100,
  autoRollbackOnBreach: true,
  minSamplesPerCohort: 20,
  maxWaitMinutes: 0.2,
  guards,
  ...extra,
});

async function createFlag(label: string): Promise<string> {
  const key = `${label}-${randomBytes(3).toString('hex')}`;
  const created = await p.owner.request('POST', '/api/flags', { key, name: key, type: 'boolean', serviceId: p.serviceId, environment: 'production', enabled: true, defaultValue: false });
  expectStatus(created, 201, 'create flag');
  return key;
}

const recordPath = (key: string) => `/api/flags/${key}/canary${qs({ serviceId: p.serviceId, environment: 'production' })}`;
const flagTargeting = async (key: string) => (await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`)).body.targeting;

/** Healthy evaluations of the flag until the pipeline's status is one of `statuses`; its record then. */
async function runUntil(key: string, statuses: string[]) {
  const deadline = Date.now() + 150_000;
  for (;;) {
    // Outside any retry: an evaluation answered other than 200 (a 429, say) fails here, instead
    // of reading later as a stage that saw no traffic.
    for (let i = 0; i < 40; i++) {
      const res = await app.request('POST', '/api/flags/evaluate', { token, body: { flagKey: key, serviceId: p.serviceId, environment: 'production', context: { targetingKey: `u-${randomBytes(5).toString('hex')}` } } });
      expectStatus(res, 200, 'evaluate');
    }
    const current = await p.viewer.request('GET', recordPath(key));
    if (statuses.includes(current.body?.status)) return current.body;
    if (Date.now() > deadline) throw new Error(`the canary of ${key} was still ${current.status} ${current.body?.status} after 150 s, not ${statuses.join(' or ')}`);
  }
}

describe('Prometheus guards on a canary', () => {
  it('a healthy guard lets the stage pass, and the gate shows its value', async () => {
    const key = await createFlag('guard-ok');
    await exporter.set(key, 0.01);
    const started = await p.member.request('POST', `/api/flags/${key}/canary`, config([guard()]));
    expectStatus(started, 201, 'start');
    expect(started.body.config.guards).toEqual([guard()]);

    const record = await runUntil(key, ['completed', 'rolled_back', 'paused']);
    expect(record.status).toBe('completed');
    const gate = record.completedStages[0].gate;
    expect(gate.decision).toBe('pass');
    expect(gate.guards).toEqual([{ name: 'app errors', decision: 'pass', reason: '0.01 not > 0.05', value: 0.01 }]);
  }, 180_000);

  it('a breached guard fails the gate and rolls the flag back, naming the guard', async () => {
    const key = await createFlag('guard-breach');
    await exporter.set(key, 0.3);
    const started = await p.member.request('POST', `/api/flags/${key}/canary`, config([guard()]));
    expectStatus(started, 201, 'start');

    const record = await runUntil(key, ['completed', 'rolled_back', 'paused']);
    expect(record.status).toBe('rolled_back');
    expect(record.statusReason).toMatch(/gate failed at 50%: guard "app errors" breached: 0\.3 > 0\.05/);
    expect(record.health.status).toBe('breach');
    expect(record.currentStage.gate.decision).toBe('fail');
    expect(record.currentStage.gate.guards[0]).toMatchObject({ name: 'app errors', decision: 'fail', value: 0.3 });
    expect(await flagTargeting(key)).toEqual([]);
  }, 180_000);

  it('no data never passes: the stage waits, names the guard and why, then pauses', async () => {
    const key = await createFlag('guard-nodata');
    const started = await p.member.request('POST', `/api/flags/${key}/canary`, config([guard({ name: 'silent', query: `max(${GUARD_METRIC}{flag_key="{{flagKey}}-absent"})` })]));
    expectStatus(started, 201, 'start');

    const record = await runUntil(key, ['completed', 'rolled_back', 'paused']);
    expect(record.status).toBe('paused');
    expect(record.statusReason).toMatch(/no decision after waiting .*guard "silent" cannot be judged: no data/);
    expect(record.health.status).toBe('insufficient_data');
    const gate = record.currentStage.gate;
    expect(gate.decision).toBe('wait');
    // The cohorts alone would have passed: only the guard holds the stage.
    expect(gate.treatment.exposures).toBeGreaterThanOrEqual(20);
    expect(gate.guards).toEqual([{ name: 'silent', decision: 'wait', reason: 'no data: the query answered no series', value: null }]);
    expect((await flagTargeting(key))[0].rolloutPercentage).toBe(50);
    expectStatus(await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'test done' }), 200, 'abort');
  }, 180_000);

  it('a query Prometheus refuses waits with its error, as does an answer of several series', async () => {
    const key = await createFlag('guard-badquery');
    const guards = [guard({ name: 'broken', query: `sum(${GUARD_METRIC}{flag_key="{{flagKey}}"}` }), guard({ name: 'unaggregated', query: GUARD_METRIC })];
    await exporter.set(`${key}-other`, 0);
    await exporter.set(key, 0.01);
    const started = await p.member.request('POST', `/api/flags/${key}/canary`, config(guards));
    expectStatus(started, 201, 'start');

    const record = await runUntil(key, ['completed', 'rolled_back', 'paused']);
    expect(record.status).toBe('paused');
    const [broken, unaggregated] = record.currentStage.gate.guards;
    expect(broken).toMatchObject({ name: 'broken', decision: 'wait', value: null });
    expect(broken.reason).toMatch(/^query error \(HTTP 400\): bad_data: /);
    expect(unaggregated).toMatchObject({ name: 'unaggregated', decision: 'wait' });
    expect(unaggregated.reason).toMatch(/^the query answered \d+ series; it must answer one/);
    expect(record.statusReason).toMatch(/guard "broken" cannot be judged: query error/);
    expectStatus(await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'test done' }), 200, 'abort');
  }, 180_000);

  it('refuses bad guards at start with a clear error and changes nothing', async () => {
    const key = await createFlag('guard-refused');
    const cases: [unknown[], RegExp][] = [
      [[guard({ url: 'http://169.254.169.254' })], /not in PROMETHEUS_URL_ALLOWLIST/],
      [[guard({ url: 'file:///etc/passwd' })], /http or https/],
      [[guard({ url: `${prometheus.url.replace('://', '://admin:secret@')}` })], /must not contain credentials/],
      [[guard({ url: `${prometheus.url}/?query=up` })], /query string/],
      [[guard(), guard()], /another guard is named "app errors"/],
      [[1, 2, 3, 4, 5, 6].map((i) => guard({ name: `g${i}` })), /at most 5|5 element/],
      [[guard({ query: 'x'.repeat(2_001) })], /2000/],
      [[guard({ failWhen: { op: '>=', threshold: 1 } })], /op/],
    ];
    for (const [guards, message] of cases) {
      const res = await p.member.request('POST', `/api/flags/${key}/canary`, config(guards));
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    expect((await p.viewer.request('GET', recordPath(key))).status).toBe(404);
    expect(await flagTargeting(key)).toEqual([]);
  }, 60_000);
});
