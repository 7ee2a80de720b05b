import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { createGuardrailActivities } from '../../activities/guardrail';
import { GUARD_RECHECKS, GUARD_RECHECK_MS, guardrailWatch } from '../../workflows/guardrail';
import { GUARDRAIL_SETTLE_MS, guardrailCheckAt, guardrailWatchId, type GuardrailCheckInput, type GuardrailCheckResult } from '../../workflows/messages';

/**
 * The guardrail watch on Temporal's time-skipping test server: the timer runs to the end of the
 * change's after-window (plus the settle time), then the check is called once with the watched
 * version. The check itself (the auto-rollback decision) is covered over HTTP in guardrail.test.ts.
 */
let env: TestWorkflowEnvironment;
const taskQueue = `guardrail-${randomBytes(3).toString('hex')}`;
const MINUTE = 60_000;

beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const path = process.env.TEMPORAL_TEST_SERVER_PATH;
  if (!path) throw new Error('TEMPORAL_TEST_SERVER_PATH is not set: source scripts/test-infra.sh up');
  env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path } } });
});
afterAll(async () => {
  await env?.teardown();
});

interface Call {
  input: GuardrailCheckInput;
  atMs: number;
}

/** A worker whose check records when and with what it was called, and answers `verdict` (or the n-th call's answer). */
async function withWorker(calls: Call[], fn: () => Promise<void>, answer: GuardrailCheckResult | ((call: number) => GuardrailCheckResult) = { verdict: 'rolled_back', reason: 'error rate rose' }) {
  const bundlePath = process.env.WORKFLOW_BUNDLE_PATH;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    ...(bundlePath ? { workflowBundle: { codePath: bundlePath } } : { workflowsPath: require.resolve('../../workflows/index.ts') }),
    activities: createGuardrailActivities({
      guardrail: {
        async check(input) {
          calls.push({ input, atMs: await env.currentTimeMs() });
          return typeof answer === 'function' ? answer(calls.length) : answer;
        },
      },
    }),
  });
  await worker.runUntil(fn);
}

const flagId = () => `flg_${randomBytes(6).toString('hex')}`;

it('computes the check time from the exact after-window of insights', () => {
  const changedAt = Date.UTC(2026, 0, 1, 12, 0, 42, 500);
  // The after-window starts at the change: 12:00:42.500 to 12:15:42.500 for 15 minutes.
  expect(guardrailCheckAt(changedAt, 15)).toBe(Date.UTC(2026, 0, 1, 12, 15, 42, 500) + GUARDRAIL_SETTLE_MS);
  expect(guardrailCheckAt(Date.UTC(2026, 0, 1, 12, 0), 1)).toBe(Date.UTC(2026, 0, 1, 12, 1) + GUARDRAIL_SETTLE_MS);
});

it('waits for the after-window to end, then calls the check once with the watched version', async () => {
  const calls: Call[] = [];
  const id = flagId();
  await withWorker(calls, async () => {
    const changedAtMs = await env.currentTimeMs();
    const checkAt = guardrailCheckAt(changedAtMs, 15);
    const handle = await env.client.workflow.start(guardrailWatch, {
      taskQueue,
      workflowId: guardrailWatchId(id, 7),
      args: [{ flagId: id, version: 7, windowMinutes: 15, changedAt: new Date(changedAtMs).toISOString() }],
    });
    await env.sleep(15 * MINUTE);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(calls).toHaveLength(0);
    await expect(handle.result()).resolves.toEqual({ verdict: 'rolled_back', reason: 'error rate rose' });
    expect(calls).toHaveLength(1);
    expect(calls[0].input).toEqual({ flagId: id, version: 7, windowMinutes: 15 });
    // Not before the window is complete, and not long after (generous: the test server's own steps).
    expect(calls[0].atMs).toBeGreaterThanOrEqual(checkAt);
    expect(calls[0].atMs - checkAt).toBeLessThan(MINUTE);
  });
});

it('judges at once when started after its window (an outbox backlog)', async () => {
  const calls: Call[] = [];
  const id = flagId();
  await withWorker(
    calls,
    async () => {
      const now = await env.currentTimeMs();
      const handle = await env.client.workflow.start(guardrailWatch, {
        taskQueue,
        workflowId: guardrailWatchId(id, 2),
        args: [{ flagId: id, version: 2, windowMinutes: 5, changedAt: new Date(now - 60 * MINUTE).toISOString() }],
      });
      await expect(handle.result()).resolves.toEqual({ verdict: 'passed', reason: 'healthy' });
      expect(calls.map((c) => c.input)).toEqual([{ flagId: id, version: 2, windowMinutes: 5 }]);
      expect(calls[0].atMs - now).toBeLessThan(MINUTE);
    },
    { verdict: 'passed', reason: 'healthy' },
  );
});

it('checks again every minute while a guard cannot be judged, and ends waiting after the last recheck', async () => {
  const waiting: GuardrailCheckResult = { verdict: 'waiting', reason: 'guard "p99" cannot be judged: no data: the query answered no series' };
  const breachedOnThird = (call: number): GuardrailCheckResult => (call < 3 ? waiting : { verdict: 'rolled_back', reason: 'guard "p99" breached: 900 > 500' });
  const cases: [(call: number) => GuardrailCheckResult, number][] = [
    [breachedOnThird, 3],
    [() => waiting, GUARD_RECHECKS + 1],
  ];
  for (const [answer, expected] of cases) {
    const calls: Call[] = [];
    const id = flagId();
    await withWorker(
      calls,
      async () => {
        const now = await env.currentTimeMs();
        const handle = await env.client.workflow.start(guardrailWatch, {
          taskQueue,
          workflowId: guardrailWatchId(id, 3),
          args: [{ flagId: id, version: 3, windowMinutes: 1, changedAt: new Date(now - 60 * MINUTE).toISOString() }],
        });
        const result = await handle.result();
        expect(calls).toHaveLength(expected);
        expect(result.verdict).toBe(expected === 3 ? 'rolled_back' : 'waiting');
        // Only the watch's last check says so: a waiting verdict there notifies the people on call.
        expect(calls.map((c) => c.input.lastCheck ?? false)).toEqual(calls.map((_, i) => i === GUARD_RECHECKS));
        for (let i = 1; i < calls.length; i++) expect(calls[i].atMs - calls[i - 1].atMs).toBeGreaterThanOrEqual(GUARD_RECHECK_MS);
      },
      answer,
    );
  }
}, 60_000);

it('fails the check (to be retried) on a worker started without the checker', async () => {
  await expect(createGuardrailActivities({}).checkGuardrail({ flagId: 'flg_x', version: 2, windowMinutes: 1 })).rejects.toThrow(/without the guardrail checker/);
});
