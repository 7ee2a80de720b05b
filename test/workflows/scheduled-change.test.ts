import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createChangeRequestActivities } from '../../activities/change-requests';
import { TemporalChangeSchedules } from '../../api/features/change-requests/wiring';
import { projectPath } from '../../api/infra/paths';
import type { Temporal } from '../../api/infra/temporal';
import type { ScheduledChangeActivities, ScheduledChangeInput } from '../../workflows/messages';
import { scheduledChangeWorkflowId } from '../../workflows/messages';
import { startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, qs, type Project } from '../webhooks/support';

/**
 * The scheduledChange workflow (docs/change-requests.md#scheduled-changes) on the time-skipping
 * test server, with its real activity: ChangeRequestService.fire over the app's Postgres and flag
 * write path. Requests are made through the HTTP API, scheduled hours ahead so the app's own
 * timers (on the dev server, in real time) never fire during the test; this file arms the same
 * workflow on the time-skipping server with the signals the service sends.
 */

let app: TestApp;
let env: TestWorkflowEnvironment;
let workflowBundle: WorkflowBundleOption;
let schedules: TemporalChangeSchedules;
let p: Project;
const taskQueue = `scheduled-change-${randomBytes(4).toString('hex')}`;
const HOUR = 3600_000;

beforeAll(async () => {
  app = await startTestApp();
  p = await createProject(app);
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Installed already in this process.
  }
  const path = process.env.TEMPORAL_TEST_SERVER_PATH;
  env = await TestWorkflowEnvironment.createTimeSkipping(path ? { server: { executable: { type: 'existing-path', path } } } : undefined);
  const bundlePath = process.env.WORKFLOW_BUNDLE_PATH;
  workflowBundle = bundlePath ? { codePath: bundlePath } : { code: (await bundleWorkflowCode({ workflowsPath: projectPath('workflows', 'index.ts'), logger: new DefaultLogger('WARN') })).code };
  const temporal: Temporal = { client: env.client, address: '', namespace: 'default', taskQueue, devServer: false, connected: true, bounded: (call) => call(), close: async () => undefined };
  schedules = new TemporalChangeSchedules(temporal);
}, 120_000);

afterAll(async () => {
  await env?.teardown();
  await app?.stop();
});

function worker(activities: ScheduledChangeActivities = createChangeRequestActivities({ changeRequests: app.platform.changeRequests }), options: { maxCachedWorkflows?: number } = {}): Promise<Worker> {
  return Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle, activities, ...options });
}

const newKey = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;
const path = (id: string, step = '') => `/api/projects/${p.projectId}/change-requests/${id}${step ? `/${step}` : ''}`;

async function flagVersion(key: string) {
  const res = await p.owner.request('GET', `/api/flags/${key}${qs({ serviceId: p.serviceId, environment: 'production' })}`);
  expectStatus(res, 200, 'flag');
  return res.body as { enabled: boolean; version: number };
}

async function statusOf(id: string) {
  return (await p.member.request('GET', path(id))).body as { status: string; failureReason: string | null };
}

/** A request toggling a new production flag on, scheduled `hours` ahead of the test server's clock, with no policy. */
async function scheduledRequest(hours: number): Promise<{ id: string; key: string; at: string }> {
  const key = newKey('sched');
  await createFlag(p.owner, p.serviceId, key);
  const res = await p.member.request('POST', `/api/projects/${p.projectId}/change-requests`, {
    title: `scheduled ${key}`,
    scheduledAt: new Date(Date.now() + hours * HOUR).toISOString(),
    changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'toggle', body: { enabled: true } }],
  });
  expectStatus(res, 201, 'open');
  // The API checks times against the wall clock; the test server's clock runs ahead of it after each skip.
  const at = new Date((await env.currentTimeMs()) + hours * HOUR).toISOString();
  await app.platform.db.sql`UPDATE change_requests SET scheduled_at = ${at} WHERE id = ${res.body.id}`;
  return { id: res.body.id as string, key, at };
}

const fired = (id: string) => env.client.workflow.getHandle(scheduledChangeWorkflowId(id));
const auditCount = async (id: string, action: string) =>
  (await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_logs WHERE resource_id = ${id} AND action = ${action}`)[0].n;

it('applies at its time and not before', async () => {
  const r = await scheduledRequest(2);
  const w = await worker();
  await w.runUntil(async () => {
    await schedules.set(r.id, r.at);
    await env.sleep(Date.parse(r.at) - (await env.currentTimeMs()) - 5 * 60_000);
    expect((await statusOf(r.id)).status).toBe('scheduled');
    expect((await flagVersion(r.key)).enabled).toBe(false);
    expect(await fired(r.id).result()).toBe('applied');
  });
  expect((await statusOf(r.id)).status).toBe('applied');
  expect(await flagVersion(r.key)).toMatchObject({ enabled: true, version: 2 });
});

it('a rescheduled request fires at the new time only; the old time finds nothing to apply', async () => {
  const r = await scheduledRequest(2);
  const later = new Date(Date.parse(r.at) + 3 * HOUR).toISOString();
  const w = await worker();
  await w.runUntil(async () => {
    await schedules.set(r.id, r.at);
    expectStatus(await p.member.request('PATCH', path(r.id), { title: 'later' }), 200, 'edit');
    await app.platform.db.sql`UPDATE change_requests SET scheduled_at = ${later} WHERE id = ${r.id}`;
    await schedules.set(r.id, later);
    await env.sleep(Date.parse(r.at) - (await env.currentTimeMs()) + 10 * 60_000);
    expect((await statusOf(r.id)).status).toBe('scheduled');
    expect((await flagVersion(r.key)).enabled).toBe(false);
    // A timer for the old time that still fired (a lost signal) is refused by the activity.
    expect(await app.platform.changeRequests.fire(r.id, r.at)).toBe('skipped');
    expect(await fired(r.id).result()).toBe('applied');
  });
  expect((await flagVersion(r.key)).version).toBe(2);
});

it('a cancelled request never fires', async () => {
  const r = await scheduledRequest(1);
  const w = await worker();
  await w.runUntil(async () => {
    await schedules.set(r.id, r.at);
    expectStatus(await p.member.request('POST', path(r.id, 'cancel')), 200, 'cancel');
    await schedules.clear(r.id);
    expect(await fired(r.id).result()).toBe('cancelled');
  });
  expect(await app.platform.changeRequests.fire(r.id, r.at)).toBe('skipped');
  expect((await flagVersion(r.key)).enabled).toBe(false);
  expect((await statusOf(r.id)).status).toBe('cancelled');
});

it('a timer that fires while no worker runs applies once a worker is back', async () => {
  const r = await scheduledRequest(1);
  // No cached workflow: its next task goes to whichever worker polls, as after a real crash.
  const first = await worker(undefined, { maxCachedWorkflows: 0 });
  await first.runUntil(async () => {
    await schedules.set(r.id, r.at);
    // Down only once the timer is in the workflow's history.
    for (let i = 0; i < 100 && !(await fired(r.id).fetchHistory()).events?.some((e) => e.timerStartedEventAttributes); i++) await new Promise((resolve) => setTimeout(resolve, 50));
  });
  // Every worker is down when the time comes: skipped to a second before it, then past it in real
  // time (the test server stops skipping while a workflow task waits for a worker).
  await env.sleep(Date.parse(r.at) - (await env.currentTimeMs()) - 1_000);
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  expect((await statusOf(r.id)).status).toBe('scheduled');
  const back = await worker();
  await back.runUntil(async () => {
    expect(await fired(r.id).result()).toBe('applied');
  });
  expect(await flagVersion(r.key)).toMatchObject({ enabled: true, version: 2 });
});

it('a worker that dies after the apply committed but before reporting it: the retried activity applies nothing more', async () => {
  const r = await scheduledRequest(1);
  let attempts = 0;
  const w = await worker({
    async fireScheduledChange(input: ScheduledChangeInput) {
      const outcome = await app.platform.changeRequests.fire(input.requestId, input.at);
      if (++attempts === 1) throw new Error('worker process died before reporting');
      return outcome;
    },
  });
  await w.runUntil(async () => {
    await schedules.set(r.id, r.at);
    expect(await fired(r.id).result()).toBe('skipped');
  });
  expect(attempts).toBe(2);
  expect(await flagVersion(r.key)).toMatchObject({ enabled: true, version: 2 });
  expect((await statusOf(r.id)).status).toBe('applied');
  expect(await auditCount(r.id, 'change_request.apply')).toBe(1);
});

it('a conflict at the scheduled time fails the request visibly', async () => {
  const r = await scheduledRequest(1);
  expectStatus(await p.owner.request('PATCH', `/api/flags/${r.key}${qs({ serviceId: p.serviceId, environment: 'production' })}`, { description: 'moved' }), 200, 'move');
  const w = await worker();
  await w.runUntil(async () => {
    await schedules.set(r.id, r.at);
    expect(await fired(r.id).result()).toBe('failed');
  });
  const after = await statusOf(r.id);
  expect(after.status).toBe('failed');
  expect(after.failureReason).toMatch(/^CONFLICT/);
  expect((await flagVersion(r.key)).enabled).toBe(false);
  expect(await auditCount(r.id, 'change_request.fail')).toBe(1);
});
