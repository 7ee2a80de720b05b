import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import postgres from 'postgres';
import { createInvitationActivities } from '../../activities/invitations';
import { invitationExpiry } from '../../workflows/invitation-expiry';
import { invitationSettledSignal } from '../../workflows/messages';
import { eventually, requireInfra } from '../support/harness';
import { templateDatabase, withDatabase } from '../support/global-setup';

/**
 * The 7-day invitation timer on Temporal's time-skipping test server, with the real activity
 * against a real Postgres database cloned from the migrated template.
 */
let env: TestWorkflowEnvironment;
let sql: postgres.Sql;
const dbName = `t_invexp_${process.pid}_${randomBytes(3).toString('hex')}`;
const taskQueue = `invitation-expiry-${randomBytes(3).toString('hex')}`;
const infra = requireInfra();

beforeAll(async () => {
  const admin = postgres(infra.databaseUrl, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`CREATE DATABASE ${dbName} TEMPLATE ${templateDatabase()}`);
  await admin.end();
  sql = postgres(withDatabase(infra.databaseUrl, dbName), { max: 4, onnotice: () => undefined });
  await sql`INSERT INTO users (id, email, name, password_hash) VALUES ('usr_wf', 'owner@example.com', 'Owner', 'x')`;
  await sql`INSERT INTO orgs (id, name, personal, created_by) VALUES ('org_wf', 'Org', true, 'usr_wf')`;
  await sql`INSERT INTO projects (id, org_id, name, slug) VALUES ('prj_wf', 'org_wf', 'P', 'p')`;

  Runtime.install({ logger: new DefaultLogger('WARN') });
  const path = process.env.TEMPORAL_TEST_SERVER_PATH;
  if (!path) throw new Error('TEMPORAL_TEST_SERVER_PATH is not set: source scripts/test-infra.sh up');
  env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path } } });
});

/** A fresh worker per test: one whose run failed cannot be run again. */
async function withWorker(fn: () => Promise<void>) {
  const bundlePath = process.env.WORKFLOW_BUNDLE_PATH;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: require.resolve('../../workflows/index.ts') }),
    activities: createInvitationActivities({ sql }),
  });
  await worker.runUntil(fn);
}

const HOUR = 3600_000;
const DAY = 24 * HOUR;

afterAll(async () => {
  await env?.teardown();
  await sql?.end();
  const admin = postgres(infra.databaseUrl, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
});

async function pendingInvitation(): Promise<string> {
  const id = `inv_${randomBytes(6).toString('hex')}`;
  await sql`
    INSERT INTO invitations (id, project_id, email, role, token_hash, invited_by, expires_at)
    VALUES (${id}, 'prj_wf', ${`${id}@example.com`}, 'member', ${randomBytes(32).toString('hex')}, 'usr_wf', now() + interval '7 days')`;
  return id;
}

const statusOf = async (id: string) => (await sql<{ status: string }[]>`SELECT status FROM invitations WHERE id = ${id}`)[0].status;
const expiryAudits = (id: string) => sql`SELECT actor, before, after FROM audit_logs WHERE action = 'invitation.expire' AND resource_id = ${id}`;

function start(invitationId: string) {
  return env.client.workflow.start(invitationExpiry, { taskQueue, workflowId: `invitation-expiry-${invitationId}`, args: [{ invitationId }] });
}

it('expires the invitation after 7 days and not before', async () => {
  const id = await pendingInvitation();
  await withWorker(async () => {
    const handle = await start(id);
    await env.sleep(6 * DAY + 23 * HOUR);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(await statusOf(id)).toBe('pending');
    await env.sleep(HOUR + 60_000);
    await expect(handle.result()).resolves.toBe('expired');
  });
  expect(await statusOf(id)).toBe('expired');
  const audits = await expiryAudits(id);
  expect(audits).toEqual([{ actor: 'system:invitation-expiry', before: { status: 'pending' }, after: { status: 'expired' } }]);
});

it('ends early when signalled settled, without touching the invitation', async () => {
  const id = await pendingInvitation();
  await sql`UPDATE invitations SET status = 'accepted', settled_at = now() WHERE id = ${id}`;
  await withWorker(async () => {
    const handle = await start(id);
    await env.sleep(DAY);
    const before = await env.currentTimeMs();
    await handle.signal(invitationSettledSignal);
    // Wait without awaiting the result (which would let the test server skip time): the
    // workflow must complete on the signal alone, with the clock standing still.
    await eventually(async () => (await handle.describe()).status.name === 'COMPLETED');
    expect((await env.currentTimeMs()) - before).toBeLessThan(HOUR);
    await expect(handle.result()).resolves.toBe('settled');
  });
  expect(await statusOf(id)).toBe('accepted');
  expect(await expiryAudits(id)).toHaveLength(0);
});

it('leaves an invitation settled without a signal alone when the timer fires', async () => {
  const id = await pendingInvitation();
  await withWorker(async () => {
    const handle = await start(id);
    await env.sleep(2 * DAY);
    await sql`UPDATE invitations SET status = 'cancelled', settled_at = now() WHERE id = ${id}`;
    await expect(handle.result()).resolves.toBe('expired');
  });
  expect(await statusOf(id)).toBe('cancelled');
  expect(await expiryAudits(id)).toHaveLength(0);
});

it('the expiry activity is idempotent', async () => {
  const id = await pendingInvitation();
  const { expireInvitation } = createInvitationActivities({ sql });
  await expect(expireInvitation(id)).resolves.toBe(true);
  await expect(expireInvitation(id)).resolves.toBe(false);
  await expect(expireInvitation('inv_missing')).resolves.toBe(false);
  expect(await expiryAudits(id)).toHaveLength(1);
});
