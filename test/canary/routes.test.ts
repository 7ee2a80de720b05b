import { randomBytes } from 'node:crypto';
import { CanaryRecordSchema, canaryConfigOf } from '../../api/domain/canary';
import { CanaryStore } from '../../api/features/canary/store';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, opaqueToken, personalToken, qs, type Project } from '../webhooks/support';

/**
 * The canary endpoints over HTTP against the real app: Postgres records, the pipeline workflow on
 * the app's Temporal with its own worker (real time: soaks here are long, so pipelines sit in
 * their first stage until the test advances or aborts them), and who may call what.
 */

let app: TestApp;
let p: Project;
let other: Project;

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  other = await createProject(app);
}, 60_000);
afterAll(async () => {
  await app?.stop();
});

const newKey = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;
const RULE = { id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: true };

async function createFlag(key: string, extra: Record<string, unknown> = {}) {
  const res = await p.owner.request('POST', '/api/flags', { key, name: key, type: 'boolean', serviceId: p.serviceId, environment: 'production', defaultValue: false, ...extra });
  expectStatus(res, 201, 'create flag');
  return res.body as { version: number; targeting: unknown[] };
}

const config = (extra: Record<string, unknown> = {}) => ({
  serviceId: p.serviceId,
  initialRolloutPercent: 10,
  targetRolloutPercent: 50,
  rampStepPercent: 20,
  soakPeriodMinutes: 30,
  errorRateGateDelta: 0.01,
  latencyGateDeltaMs: 50,
  autoRollbackOnBreach: true,
  ...extra,
});

function expectRecord(body: unknown) {
  const parsed = CanaryRecordSchema.safeParse(body);
  if (!parsed.success) throw new Error(`not a canary record: ${JSON.stringify(parsed.error.issues.slice(0, 5))}`);
}

const getFlag = async (key: string) => (await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`)).body;

describe('canary endpoints', () => {
  it('starts on an existing rule, answers it while it runs, refuses a second start, and abort restores the flag', async () => {
    const key = newKey('rule');
    const created = await createFlag(key, { targeting: [RULE] });
    const started = await p.member.request('POST', `/api/flags/${key}/canary`, config({ ruleId: 'beta' }));
    expectStatus(started, 201, 'start');
    expectRecord(started.body);
    expect(started.body).toMatchObject({ flagKey: key, serviceId: p.serviceId, environment: 'production', ruleId: 'beta', status: 'running', completedStages: [] });
    // Defaults: 100 samples per side, alpha 0.05, wait up to max(10 soaks, 1 min).
    expect(started.body.config).toMatchObject({ minSamplesPerCohort: 100, alpha: 0.05, maxWaitMinutes: 300 });
    // The 201 comes once the first stage is in the flag, its soak already counting.
    expect(started.body.currentStage).toMatchObject({ index: 0, rolloutPercent: 10 });
    expect(Date.parse(started.body.currentStage.startedAt)).not.toBeNaN();
    expect(started.body.remainingSoakSeconds).toBeGreaterThan(29 * 60);
    expect(started.body.remainingSoakSeconds).toBeLessThanOrEqual(30 * 60);
    expect((await getFlag(key)).targeting).toEqual([{ ...RULE, rolloutPercentage: 10 }]);

    const path = `/api/flags/${key}/canary${qs({ serviceId: p.serviceId, environment: 'production' })}`;
    const running = await p.viewer.request('GET', path);
    expectRecord(running.body);
    expect(running.body.currentStage).toMatchObject({ index: 0, rolloutPercent: 10, startedAt: started.body.currentStage.startedAt });

    const again = await p.member.request('POST', `/api/flags/${key}/canary`, config({ ruleId: 'beta' }));
    expect(again.status).toBe(409);

    // Without force the gate runs now: no traffic at all is `wait`, so 409 with the gate.
    const early = await p.member.request('POST', `/api/flags/${key}/canary/advance`, { serviceId: p.serviceId });
    expect(early.status).toBe(409);
    expect(early.body.gate).toMatchObject({ decision: 'wait' });

    const aborted = await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'wrong cohort' });
    expectStatus(aborted, 200, 'abort');
    expectRecord(aborted.body);
    expect(aborted.body).toMatchObject({ status: 'aborted', statusReason: 'wrong cohort' });
    const restored = await getFlag(key);
    expect(restored.targeting).toEqual([RULE]);
    expect(restored.version).toBe(created.version + 2);

    // The ended pipeline is still what GET answers; advance and abort have nothing to act on.
    const latest = await p.viewer.request('GET', path);
    expect(latest.body).toMatchObject({ id: started.body.id, status: 'aborted' });
    expect((await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'again' })).status).toBe(409);
    // A new pipeline may start once the last one ended.
    const next = await p.member.request('POST', `/api/flags/${key}/canary`, config({ ruleId: 'beta' }));
    expectStatus(next, 201, 'start again');
    expect((await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'cleanup' })).status).toBe(200);
  });

  it('inserts a first rule `canary` with the given value, and force advances to the next stage', async () => {
    const key = newKey('insert');
    await p.owner.request('POST', '/api/flags', { key, name: key, type: 'string', serviceId: p.serviceId, environment: 'production', defaultValue: 'blue' }).then((r) => expectStatus(r, 201, 'flag'));
    const missing = await p.member.request('POST', `/api/flags/${key}/canary`, config());
    expect(missing.status).toBe(400);
    const wrongType = await p.member.request('POST', `/api/flags/${key}/canary`, config({ value: 3 }));
    expect(wrongType.status).toBe(400);
    expectStatus(await p.member.request('POST', `/api/flags/${key}/canary`, config({ value: 'green' })), 201, 'start');
    expect((await getFlag(key)).targeting).toEqual([{ id: 'canary', conditions: [], value: 'green', rolloutPercentage: 10 }]);

    const forced = await p.member.request('POST', `/api/flags/${key}/canary/advance`, { serviceId: p.serviceId, force: true });
    expectStatus(forced, 200, 'force');
    expect(forced.body.currentStage).toMatchObject({ index: 1, rolloutPercent: 30 });
    expect(forced.body.completedStages[0]).toMatchObject({ index: 0, rolloutPercent: 10, forcedBy: p.member.email });
    expect((await getFlag(key)).targeting[0].rolloutPercentage).toBe(30);
    const [step] = await app.platform.db.sql<{ actor: string; metadata: any }[]>`
      SELECT actor, metadata FROM audit_logs WHERE resource_name = ${key} AND metadata->'canary'->>'rolloutPercent' = '30'`;
    expect(step.actor).toBe(`canary:${forced.body.id}`);
    expect(step.metadata.canary).toMatchObject({ forced: true, forcedBy: p.member.email, stage: 1 });
    expectStatus(await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'done' }), 200, 'abort');
    expect((await getFlag(key)).targeting).toEqual([]);
  });

  it('gives one pipeline and one 409 for two concurrent starts', async () => {
    const key = newKey('race');
    await createFlag(key);
    const [a, b] = await Promise.all([p.member.request('POST', `/api/flags/${key}/canary`, config()), p.admin.request('POST', `/api/flags/${key}/canary`, config())]);
    expect([a.status, b.status].sort()).toEqual([201, 409]);
    const [{ n }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM canary_pipelines WHERE flag_key = ${key}`;
    expect(n).toBe(1);
    expectStatus(await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'done' }), 200, 'abort');
  });

  it('answers 404 for a flag that never had a pipeline, and for a missing flag', async () => {
    const key = newKey('never');
    await createFlag(key);
    expect((await p.viewer.request('GET', `/api/flags/${key}/canary${qs({ serviceId: p.serviceId })}`)).status).toBe(404);
    expect((await p.member.request('POST', `/api/flags/no-such-flag/canary`, config())).status).toBe(404);
    expect((await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'x' })).status).toBe(404);
  });

  it('refuses callers without the right access and bad configurations', async () => {
    const key = newKey('refuse');
    await createFlag(key, { targeting: [RULE] });
    const path = `/api/flags/${key}/canary`;
    const body = config();
    const get = `${path}${qs({ serviceId: p.serviceId })}`;
    expect((await app.request('POST', path, { body })).status).toBe(401);
    expect((await app.request('GET', get)).status).toBe(401);
    expect((await app.request('POST', `${path}/advance`, { body: { serviceId: p.serviceId } })).status).toBe(401);
    expect((await app.request('POST', `${path}/abort`, { body: { serviceId: p.serviceId, reason: 'x' } })).status).toBe(401);
    // Another project's owner cannot see this one: 404 like a missing flag.
    expect((await other.owner.request('POST', path, body)).status).toBe(404);
    expect((await other.owner.request('GET', get)).status).toBe(404);
    expect((await other.owner.request('POST', `${path}/abort`, { serviceId: p.serviceId, reason: 'x' })).status).toBe(404);
    // Read-only callers may look but not start, advance or abort.
    expect((await p.viewer.request('POST', path, body)).status).toBe(403);
    const readToken = await opaqueToken(p.owner, p.projectId, { read: true });
    expect((await app.request('POST', path, { body, token: readToken })).status).toBe(403);
    expect((await app.request('POST', `${path}/advance`, { body: { serviceId: p.serviceId, force: true }, token: readToken })).status).toBe(403);
    expect((await app.request('POST', `${path}/abort`, { body: { serviceId: p.serviceId, reason: 'x' }, token: readToken })).status).toBe(403);
    expect((await app.request('POST', path, { body, token: await personalToken(p.member, 'read') })).status).toBe(403);
    expect((await app.request('GET', get, { token: readToken })).status).toBe(404);

    const bad = async (extra: Record<string, unknown>) => (await p.member.request('POST', path, config(extra))).status;
    expect(await bad({ targetRolloutPercent: 5 })).toBe(400);
    expect(await bad({ soakPeriodMinutes: 0.01 })).toBe(400);
    expect(await bad({ initialRolloutPercent: 0 })).toBe(400);
    expect(await bad({ rampStepPercent: 0.1, targetRolloutPercent: 100 })).toBe(400);
    expect(await bad({ errorRateGateDelta: 2 })).toBe(400);
    expect(await bad({ ruleId: 'nope' })).toBe(400);
    expect(await bad({ ruleId: 'beta', value: true })).toBe(400);
    expect(await bad({ surprise: true })).toBe(400);
    expect((await p.member.request('POST', path, { serviceId: p.serviceId })).status).toBe(400);
    expect((await p.member.request('POST', path, undefined, { rawBody: '{"serviceId":', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    expect((await p.member.request('POST', `${path}/abort`, { serviceId: p.serviceId })).status).toBe(400);
    expect((await p.member.request('POST', `${path}/advance`, { serviceId: p.serviceId, force: 'yes' })).status).toBe(400);
    const huge = JSON.stringify({ ...body, value: 'x'.repeat(2 * 1024 * 1024) });
    expect((await p.member.request('POST', path, undefined, { rawBody: huge, headers: { 'content-type': 'application/json' } })).status).toBe(413);
    // Nothing was started by any of them.
    expect((await p.viewer.request('GET', get)).status).toBe(404);
  });

  it('ends a pipeline whose workflow is gone instead of failing: 409, and the record says why', async () => {
    const key = newKey('lost');
    const flag = await createFlag(key);
    const [row] = await app.platform.db.sql<{ id: string }[]>`SELECT id FROM flags WHERE service_id = ${p.serviceId} AND environment = 'production' AND key = ${key}`;
    const stored = await new CanaryStore().insert(app.platform.db.sql, {
      id: `cnr_lost_${randomBytes(3).toString('hex')}`,
      projectId: p.projectId,
      flagId: row.id,
      flagKey: key,
      serviceId: p.serviceId,
      environment: 'production',
      ruleId: 'canary',
      config: canaryConfigOf({ ...config(), minSamplesPerCohort: 100, alpha: 0.05 }),
      preCanaryVersion: flag.version,
      workflowId: `canary:lost:${key}`,
      createdByActor: 'test',
    });
    const res = await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, reason: 'x' });
    expect(res.status).toBe(409);
    const after = await p.viewer.request('GET', `/api/flags/${key}/canary${qs({ serviceId: p.serviceId })}`);
    expect(after.body).toMatchObject({ id: stored.id, status: 'aborted', statusReason: 'the pipeline workflow no longer exists' });
  });

  it('documents the four routes in the OpenAPI document', async () => {
    const doc = (await app.request('GET', '/api/openapi.json')).body;
    expect(Object.keys(doc.paths['/api/flags/{key}/canary']).sort()).toEqual(['get', 'post']);
    expect(Object.keys(doc.paths['/api/flags/{key}/canary/advance'])).toEqual(['post']);
    expect(Object.keys(doc.paths['/api/flags/{key}/canary/abort'])).toEqual(['post']);
    const start = doc.paths['/api/flags/{key}/canary'].post.requestBody.content['application/json'].schema;
    expect(start.properties.soakPeriodMinutes.minimum).toBe(0.05);
    expect(start.additionalProperties).toBe(false);
  });
});

describe('GET /api/projects/{id}/canaries', () => {
  it('lists the project’s pipelines, active first, to whoever reads the project; active=true and limit narrow it', async () => {
    const ended = newKey('listed-ended');
    await createFlag(ended, { targeting: [RULE] });
    expectStatus(await p.member.request('POST', `/api/flags/${ended}/canary`, config({ ruleId: 'beta' })), 201, 'start ended');
    await eventually(async () => (await p.member.request('POST', `/api/flags/${ended}/canary/abort`, { serviceId: p.serviceId, reason: 'list test' })).status === 200);
    const running = newKey('listed-running');
    await createFlag(running, { targeting: [RULE] });
    expectStatus(await p.member.request('POST', `/api/flags/${running}/canary`, config({ ruleId: 'beta' })), 201, 'start running');

    const list = await p.viewer.request('GET', `/api/projects/${p.projectId}/canaries`);
    expectStatus(list, 200, 'list');
    const keys = (list.body.canaries as { flagKey: string; status: string }[]).map((c) => [c.flagKey, c.status]);
    expect(keys).toContainEqual([running, 'running']);
    expect(keys).toContainEqual([ended, 'aborted']);
    expect(keys.findIndex(([k]) => k === running)).toBeLessThan(keys.findIndex(([k]) => k === ended));
    for (const c of list.body.canaries) expectRecord(c);

    const active = await p.viewer.request('GET', `/api/projects/${p.projectId}/canaries${qs({ active: true })}`);
    expect((active.body.canaries as { status: string }[]).every((c) => c.status === 'running' || c.status === 'paused')).toBe(true);
    expect((active.body.canaries as { flagKey: string }[]).map((c) => c.flagKey)).not.toContain(ended);
    expect((await p.viewer.request('GET', `/api/projects/${p.projectId}/canaries${qs({ limit: 1 })}`)).body.canaries).toHaveLength(1);

    const readToken = await opaqueToken(p.owner, p.projectId, { read: true });
    expect((await app.request('GET', `/api/projects/${p.projectId}/canaries`, { token: readToken })).status).toBe(200);
    // Another project's members, anonymous callers, and bad queries.
    expect((await other.owner.request('GET', `/api/projects/${p.projectId}/canaries`)).status).toBe(404);
    expect((await app.request('GET', `/api/projects/${p.projectId}/canaries`)).status).toBe(401);
    expect((await p.viewer.request('GET', `/api/projects/${p.projectId}/canaries${qs({ limit: 101 })}`)).status).toBe(400);
    expect((await p.viewer.request('GET', `/api/projects/${p.projectId}/canaries${qs({ active: 'maybe' })}`)).status).toBe(400);
    await p.member.request('POST', `/api/flags/${running}/canary/abort`, { serviceId: p.serviceId, reason: 'done' });
  });
});
