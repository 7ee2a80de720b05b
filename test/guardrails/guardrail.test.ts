import { randomBytes } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { GuardrailConsumer } from '../../api/features/guardrails/consumer';
import type { FlagChangeEvent, FlagRecord } from '../../api/features/flags/types';
import { guardrailWatchId } from '../../workflows/messages';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, qs, startReceiver, uniquePath, type Project, type Receiver } from '../webhooks/support';

/**
 * The production guardrail end to end over HTTP against real Postgres, Temporal and chDB: a
 * toggle commits, the outbox consumer starts the watch, the watch sleeps until the change's
 * after-window is complete (1-minute windows from the change's millisecond here: 1.5 minutes),
 * the worker judges it with the auto-rollback decision on the evaluation and outcome rows put into
 * ClickHouse. The scenarios share
 * that wait: they are set up together in beforeAll and each test awaits its own outcome.
 */

const MINUTE = 60_000;
/** The watch judges 1 minute and 30 s after a change; the outbox and worker add a little. */
const WATCH_TIMEOUT_MS = 4 * MINUTE;
jest.setTimeout(6 * MINUTE);

let app: TestApp;
let receiver: Receiver;

const ts = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 23);
const many = <T,>(n: number, make: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => make(i));

interface Scenario {
  p: Project;
  key: string;
  flag: FlagRecord;
  hook: string;
  channelId: string;
}

/** Evaluations of the flag by users of their own; those with `error` report an application error (track) at the same time. */
async function insertEvaluations(p: Project, flagKey: string, rows: { at: number; error: boolean }[]) {
  const user = (i: number) => `${flagKey}-u${i}`;
  const values = rows.map((e, i) => ({
    timestamp: ts(e.at),
    project_id: p.projectId,
    service_id: p.serviceId,
    environment: 'production',
    flag_key: flagKey,
    reason: 'TARGETING_MATCH',
    variant: '',
    value: 'true',
    latency_ms: 10,
    error_code: '',
    targeting_key_hash: user(i),
    source: 'rest',
  }));
  await app.platform.analytics.client.insert({ table: 'evaluation_events', values, format: 'JSONEachRow' });
  const errors = rows.flatMap((e, i) =>
    e.error
      ? [{ timestamp: ts(e.at), project_id: p.projectId, service_id: p.serviceId, environment: 'production', event: 'error', targeting_key_hash: user(i), value: null, flags: {}, origin: 'track', event_id: randomBytes(6).toString('hex') }]
      : [],
  );
  if (errors.length) await app.platform.analytics.client.insert({ table: 'outcome_events', values: errors, format: 'JSONEachRow' });
}

const flagPath = (s: Pick<Scenario, 'p' | 'key'>, suffix = '') => `/api/flags/${s.key}${suffix}${qs({ serviceId: s.p.serviceId, environment: 'production' })}`;

/**
 * A project with a 1-minute guardrail window and an alert channel, and a production flag
 * switched on now, with 100 healthy evaluations in the minute before the toggle and 100 in the
 * first seconds after it, of whose users `afterErrors` report an application error.
 */
async function toggledInProduction(label: string, settings: { guardrailAutoRollback: boolean }, afterErrors: number): Promise<Scenario> {
  const p = await createProject(app);
  const patched = await p.admin.request('PATCH', `/api/projects/${p.projectId}`, { guardrailWindowMinutes: 1, ...settings });
  expectStatus(patched, 200, 'project guardrail settings');
  expect(patched.body).toMatchObject({ guardrailWindowMinutes: 1, ...settings });
  const hook = uniquePath(label);
  const channel = await p.owner.request('POST', `/api/orgs/${p.orgId}/alert-channels`, { type: 'webhook', name: 'on-call', url: receiver.url(hook) });
  expectStatus(channel, 201, 'create alert channel');
  const key = `${label}-${randomBytes(3).toString('hex')}`;
  await createFlag(p.owner, p.serviceId, key);
  const toggled = await p.member.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { enabled: true });
  expectStatus(toggled, 200, 'toggle');
  const history = await p.owner.request('GET', flagPath({ p, key }, '/history'));
  const changedAt = Date.parse(history.body.versions[0].createdAt);
  // The windows start and end at the change's millisecond: its first minute is judged too.
  await insertEvaluations(p, key, [
    ...many(100, (i) => ({ at: changedAt - 30_000 + i * 100, error: false })),
    ...many(100, (i) => ({ at: changedAt + 1_000 + i * 100, error: i < afterErrors })),
  ]);
  return { p, key, flag: toggled.body, hook, channelId: channel.body.id };
}

async function guardrailAudits(s: Scenario) {
  const res = await s.p.owner.request('GET', `/api/audit${qs({ projectId: s.p.projectId, resourceId: s.flag.id, action: 'guardrail.checked' })}`);
  expectStatus(res, 200, 'audit');
  return res.body.logs as { actor: string; metadata: Record<string, any> }[];
}

const awaitVerdict = (s: Scenario) => eventually(async () => (await guardrailAudits(s))[0], WATCH_TIMEOUT_MS, 1_000);

const watchOf = (flag: FlagRecord) => app.platform.temporal.client.workflow.getHandle(guardrailWatchId(flag.id, flag.version));

/** The guardrail consumer has handled every committed change so far. */
async function outboxDrained() {
  await eventually(async () => {
    const [row] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flag_outbox_pending WHERE consumer = 'guardrail'`;
    return row.n === 0;
  });
}

let rolledBack: Scenario;
let notifyOnly: Scenario;
let healthy: Scenario;

beforeAll(async () => {
  app = await startTestApp();
  receiver = await startReceiver();
  [rolledBack, notifyOnly, healthy] = await Promise.all([
    toggledInProduction('trip', { guardrailAutoRollback: true }, 40),
    toggledInProduction('notify', { guardrailAutoRollback: false }, 40),
    toggledInProduction('healthy', { guardrailAutoRollback: true }, 0),
  ]);
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

describe('a production toggle', () => {
  it('starts one watch per change, which a redelivered event does not start again', async () => {
    await outboxDrained();
    const first = await eventually(() => watchOf(rolledBack.flag).describe());
    expect(first.status.name).toBe('RUNNING');
    expect(first.type).toBe('guardrailWatch');
    const consumer = new GuardrailConsumer({ sql: app.platform.db.sql, temporal: app.platform.temporal });
    const event: FlagChangeEvent = {
      id: 'evt_redelivered',
      event: 'flag.toggled',
      timestamp: rolledBack.flag.updatedAt,
      data: { flagKey: rolledBack.key, projectId: rolledBack.p.projectId, serviceId: rolledBack.p.serviceId, environment: 'production', changes: { enabled: { from: false, to: true } } },
      flag: rolledBack.flag,
      actor: rolledBack.p.member.email,
      actorUserId: rolledBack.p.member.id,
    };
    await consumer.handle(event);
    await consumer.handle(event);
    expect((await watchOf(rolledBack.flag).describe()).runId).toBe(first.runId);
  });

  it('is left to a canary pipeline when the pipeline made it', async () => {
    const consumer = new GuardrailConsumer({ sql: app.platform.db.sql, temporal: app.platform.temporal });
    const flag = { ...healthy.flag, version: healthy.flag.version + 100 };
    await consumer.handle({
      id: 'evt_canary_stage',
      event: 'flag.updated',
      timestamp: new Date().toISOString(),
      data: { flagKey: healthy.key, projectId: healthy.p.projectId, serviceId: healthy.p.serviceId, environment: 'production', changes: { targeting: { from: [], to: [] } } },
      flag,
      actor: 'canary:cnp_test',
      actorUserId: null,
    });
    await expect(watchOf(flag).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });

  it('is rolled back automatically when the error rate rose, and the alert channels hear of it', async () => {
    const s = rolledBack;
    const verdict = await awaitVerdict(s);
    expect(verdict.actor).toBe('system:guardrail');
    expect(verdict.metadata).toMatchObject({
      verdict: 'rolled_back',
      actionTaken: 'rolled_back',
      tripped: true,
      version: 2,
      newVersionNumber: 3,
      targetVersionNumber: 1,
      windowMinutes: 1,
      autoRollbackEnabled: true,
      environment: 'production',
      before: { evaluations: 100, errors: 0 },
      after: { evaluations: 100, errors: 40, errorRate: 0.4 },
      delta: { errorRateDelta: 0.4 },
      limits: { maxErrorRateDelta: 0.02, maxLatencyDeltaMs: 200 },
      alertNotifiedChannels: [{ id: s.channelId, name: 'on-call', type: 'webhook' }],
    });
    expect(verdict.metadata.reason).toMatch(/error rate rose/);

    const flag = await s.p.owner.request('GET', flagPath(s));
    expect(flag.body).toMatchObject({ enabled: false, version: 3 });
    const history = await s.p.owner.request('GET', flagPath(s, '/history'));
    expect(history.body.versions[0]).toMatchObject({ version: 3, changeType: 'rollback', actor: 'system:guardrail' });
    const audit = await s.p.owner.request('GET', `/api/audit${qs({ projectId: s.p.projectId, resourceId: s.flag.id, action: 'flag.update' })}`);
    expect(audit.body.logs[0]).toMatchObject({ actor: 'system:guardrail', metadata: { rollbackTo: 1, autoRollback: { fromVersion: 2 } } });

    const delivered = await eventually(async () => receiver.received(s.hook).length > 0 && receiver.received(s.hook), 30_000);
    expect(delivered[0].body.data).toMatchObject({ kind: 'flag.auto_rollback', flagKey: s.key, severity: 'critical' });
    await expect(watchOf(s.flag).result()).resolves.toMatchObject({ verdict: 'rolled_back' });
    // The rollback is a change too, but never watched: auto-rollback does not undo rollbacks.
    await outboxDrained();
    await expect(watchOf(flag.body).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);

    // A retried check (its first attempt rolled back, then failed) knows its own rollback.
    const retried = await app.platform.guardrail.check({ flagId: s.flag.id, version: 2, windowMinutes: 1 });
    expect(retried).toMatchObject({ verdict: 'rolled_back', reason: expect.stringMatching(/earlier attempt/) });
    expect((await s.p.owner.request('GET', flagPath(s))).body.version).toBe(3);
  });

  it('is only reported when the project turned automatic rollback off', async () => {
    const s = notifyOnly;
    const verdict = await awaitVerdict(s);
    expect(verdict.metadata).toMatchObject({
      verdict: 'tripped',
      actionTaken: 'would_roll_back',
      tripped: true,
      version: 2,
      targetVersionNumber: 1,
      autoRollbackEnabled: false,
      after: { evaluations: 100, errors: 40 },
      alertNotifiedChannels: [{ id: s.channelId, name: 'on-call', type: 'webhook' }],
    });
    const flag = await s.p.owner.request('GET', flagPath(s));
    expect(flag.body).toMatchObject({ enabled: true, version: 2 });
    const delivered = await eventually(async () => receiver.received(s.hook).length > 0 && receiver.received(s.hook), 30_000);
    expect(delivered[0].body.data).toMatchObject({ kind: 'flag.guardrail_tripped', flagKey: s.key, details: { version: 2, targetVersionNumber: 1 } });
  });

  it('passes a healthy change and leaves it alone', async () => {
    const s = healthy;
    const verdict = await awaitVerdict(s);
    expect(verdict.metadata).toMatchObject({ verdict: 'passed', actionTaken: 'none', tripped: false, version: 2, after: { evaluations: 100, errors: 0 }, alertNotifiedChannels: [] });
    expect((await s.p.owner.request('GET', flagPath(s))).body).toMatchObject({ enabled: true, version: 2 });
    expect(receiver.received(s.hook)).toHaveLength(0);
  });
});

describe('changes that are not watched', () => {
  it('starts no watch in development, nor for a production change that serves nothing different', async () => {
    const p = healthy.p;
    const devKey = `dev-${randomBytes(3).toString('hex')}`;
    await createFlag(p.owner, p.serviceId, devKey, 'development');
    const dev = await p.member.request('POST', `/api/flags/${devKey}/toggle${qs({ serviceId: p.serviceId, environment: 'development' })}`, { enabled: true });
    expectStatus(dev, 200, 'development toggle');
    const prodKey = `desc-${randomBytes(3).toString('hex')}`;
    await createFlag(p.owner, p.serviceId, prodKey);
    const described = await p.member.request('PATCH', `/api/flags/${prodKey}${qs({ serviceId: p.serviceId, environment: 'production' })}`, { description: 'just words' });
    expectStatus(described, 200, 'description change');
    await outboxDrained();
    await expect(watchOf(dev.body).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    await expect(watchOf(described.body).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });
});

describe('the check at the end of a watch', () => {
  it('records a watched version the flag moved past as superseded, and ends quietly for a deleted flag', async () => {
    const p = healthy.p;
    const key = `moved-${randomBytes(3).toString('hex')}`;
    await createFlag(p.owner, p.serviceId, key);
    const toggle = (enabled: boolean) => p.member.request('POST', `/api/flags/${key}/toggle${qs({ serviceId: p.serviceId, environment: 'production' })}`, { enabled });
    const on = await toggle(true);
    expectStatus(on, 200, 'toggle on');
    expectStatus(await toggle(false), 200, 'toggle off');
    const watched = { flagId: on.body.id, version: on.body.version, windowMinutes: 1 };
    await expect(app.platform.guardrail.check(watched)).resolves.toMatchObject({ verdict: 'superseded', reason: expect.stringMatching(/superseded by version 3/) });
    const audits = await guardrailAudits({ p, flag: on.body } as Scenario);
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({ actor: 'system:guardrail', metadata: { verdict: 'superseded', version: 2, windowMinutes: 1, autoRollbackEnabled: true } });
    expect((await p.owner.request('GET', flagPath({ p, key }))).body).toMatchObject({ enabled: false, version: 3 });

    expectStatus(await p.owner.request('DELETE', flagPath({ p, key })), 204, 'delete flag');
    await expect(app.platform.guardrail.check({ ...watched, version: 3 })).resolves.toMatchObject({ verdict: 'flag_deleted' });
    expect(await guardrailAudits({ p, flag: on.body } as Scenario)).toHaveLength(1);
  });
});

describe('PATCH /api/projects/:id guardrail settings', () => {
  it('are project managers\' to change, and validated', async () => {
    const p = healthy.p;
    const path = `/api/projects/${p.projectId}`;
    const got = await p.viewer.request('GET', path);
    expect(got.body).toMatchObject({ guardrailAutoRollback: true, guardrailWindowMinutes: 1 });
    expect((await app.request('PATCH', path, { body: { guardrailAutoRollback: false } })).status).toBe(401);
    expect((await p.member.request('PATCH', path, { guardrailAutoRollback: false })).status).toBe(403);
    expect((await p.viewer.request('PATCH', path, { guardrailWindowMinutes: 5 })).status).toBe(403);
    const stranger = (await createProject(app)).owner;
    expect([403, 404]).toContain((await stranger.request('PATCH', path, { guardrailWindowMinutes: 5 })).status);
    for (const bad of [{ guardrailWindowMinutes: 0 }, { guardrailWindowMinutes: 1_441 }, { guardrailWindowMinutes: 2.5 }, { guardrailWindowMinutes: '5' }, { guardrailAutoRollback: 'no' }]) {
      const res = await p.admin.request('PATCH', path, bad);
      expect(res.status).toBe(400);
      expect(res.body.details.map((d: { path: string }) => d.path)).toContain(`body.${Object.keys(bad)[0]}`);
    }
    const huge = await p.admin.request('PATCH', path, { description: 'x'.repeat(2_000_000) });
    expect([400, 413]).toContain(huge.status);
    const audit = await p.owner.request('GET', `/api/audit${qs({ projectId: p.projectId, action: 'project.update' })}`);
    expect(audit.body.logs.some((l: any) => l.after?.guardrailWindowMinutes === 1)).toBe(true);
    expect((await p.viewer.request('GET', path)).body).toMatchObject({ guardrailAutoRollback: true, guardrailWindowMinutes: 1 });
  });
});
