import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { banditActivities } from '../../activities/bandit';
import { banditEndedSignal, type BanditReallocationInput } from '../../workflows/messages';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { createProject, expectStatus, type Project } from '../webhooks/support';
import { auditOf, createExperiment, createVariantFlag, experimentBody, getFlag, newKey, reward, weightsOf } from '../experiments/support';

/**
 * The bandit reallocation schedule (workflows/bandit.ts) on Temporal's time-skipping test server,
 * with the real activity of a real app (Postgres, the flag write path, chDB): a round runs at each
 * interval and not before, the run continues as new after its rounds, and it ends with the
 * experiment. The app's own workflow for each experiment sleeps on the app's Temporal meanwhile
 * (15 real minutes: it never wakes during the test).
 */

let app: TestApp;
let p: Project;
let env: TestWorkflowEnvironment;
const taskQueue = `bandit-${randomBytes(3).toString('hex')}`;
const MINUTE = 60_000;

beforeAll(async () => {
  // The app's worker installs the Temporal runtime the test environment then shares.
  app = await startTestApp();
  p = await createProject(app);
  const path = process.env.TEMPORAL_TEST_SERVER_PATH;
  if (!path) throw new Error('TEMPORAL_TEST_SERVER_PATH is not set: source scripts/test-infra.sh up');
  env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path } } });
}, 120_000);

afterAll(async () => {
  await env?.teardown();
  await app?.stop();
});

async function withWorker(fn: () => Promise<void>) {
  const bundlePath = process.env.WORKFLOW_BUNDLE_PATH;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: require.resolve('../../workflows/index.ts') }),
    activities: banditActivities(app.platform.bandit),
  });
  await worker.runUntil(fn);
}

const start = (input: BanditReallocationInput) =>
  env.client.workflow.start('banditReallocation', { taskQueue, workflowId: `bandit-test:${input.experimentId}:${randomBytes(2).toString('hex')}`, args: [input] });

const statusOf = async (id: string) => (await p.viewer.request('GET', `/api/experiments/${id}/bandit-status`)).body;

it('reallocates at each interval and not before, continues as new after its rounds, and ends when the experiment stops', async () => {
  const key = newKey('sched');
  await createVariantFlag(p.owner, p.serviceId, key);
  const exp = await createExperiment(p.member, experimentBody(p, key));
  await reward(p.member, exp.id, 'control', 100, 5);
  await reward(p.member, exp.id, 'treatment', 100, 25);

  await withWorker(async () => {
    const handle = await start({ experimentId: exp.id, intervalMinutes: 15, roundsPerRun: 2 });
    const firstRunId = (await handle.describe()).runId;
    await env.sleep(14 * MINUTE);
    expect((await statusOf(exp.id)).rounds).toBe(0);
    expect(weightsOf(await getFlag(p, key))).toEqual({ control: 50, treatment: 50 });

    await env.sleep(2 * MINUTE);
    const first = await eventually(async () => {
      const s = await statusOf(exp.id);
      return s.rounds === 1 ? s : null;
    });
    expect(first.variants.find((v: any) => v.name === 'treatment').allocation).toBeGreaterThan(0.5);
    expect(weightsOf(await getFlag(p, key)).treatment).toBeGreaterThan(50);
    const scheduled = (await auditOf(app, key)).filter((a) => a.action === 'flag.update').pop()!;
    expect(scheduled.actor).toBe(`bandit:${exp.id}`);
    expect(scheduled.metadata.bandit).toMatchObject({ trigger: 'scheduled', round: 1, outcome: 'reallocated' });

    // Round 2 ends the first run (roundsPerRun 2); round 3 runs in the next.
    await env.sleep(15 * MINUTE);
    await eventually(async () => (await statusOf(exp.id)).rounds === 2);
    await env.sleep(15 * MINUTE);
    await eventually(async () => (await statusOf(exp.id)).rounds === 3);
    const described = await env.client.workflow.getHandle(handle.workflowId).describe();
    expect(described.status.name).toBe('RUNNING');
    expect(described.runId).not.toBe(firstRunId);

    // Stopped through the API (which signals the app's own workflow): this one ends at its next round.
    expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
    expect(await env.client.workflow.getHandle(handle.workflowId).result()).toBe('stopped');
    expect((await statusOf(exp.id)).rounds).toBe(3);
  });
}, 120_000);

it('completes when a scheduled round promotes the winner', async () => {
  const key = newKey('promote');
  await createVariantFlag(p.owner, p.serviceId, key);
  const exp = await createExperiment(p.member, experimentBody(p, key, { autoRolloutWinner: true }));
  await reward(p.member, exp.id, 'control', 100, 5);
  await reward(p.member, exp.id, 'treatment', 100, 25);
  await withWorker(async () => {
    const handle = await start({ experimentId: exp.id, intervalMinutes: 15 });
    expect(await handle.result()).toBe('completed');
  });
  expect(await statusOf(exp.id)).toMatchObject({ status: 'completed', winner: 'treatment', rounds: 1 });
  expect(weightsOf(await getFlag(p, key))).toEqual({ control: 0, treatment: 100 });
}, 120_000);

it('returns at once on the ended signal without another round', async () => {
  const key = newKey('signal');
  await createVariantFlag(p.owner, p.serviceId, key);
  const exp = await createExperiment(p.member, experimentBody(p, key));
  await withWorker(async () => {
    const handle = await start({ experimentId: exp.id, intervalMinutes: 60 });
    await handle.signal(banditEndedSignal, 'stopped');
    expect(await handle.result()).toBe('stopped');
  });
  expect((await statusOf(exp.id)).rounds).toBe(0);
  expectStatus(await p.member.request('POST', `/api/experiments/${exp.id}/stop`), 200, 'stop');
}, 60_000);
