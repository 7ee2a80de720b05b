import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Runtime, DefaultLogger, Worker } from '@temporalio/worker';
import { deliveriesQueuedSignal, finalStatusOf, type AttemptResult, type DeliveryStatus } from '../../workflows/messages';
import { projectPath } from '../../api/infra/paths';
import type { deliverOutbound } from '../../workflows/webhook-delivery';
import { DELIVERIES_PER_RUN, LANE_IDLE_MS, type deliveryLane } from '../../workflows/delivery-lane';

/**
 * The delivery workflow's schedule on the time-skipping test server: attempts 0, 1, 2 and 4 s
 * after the previous one (offsets 0, 1, 3, 7 s), which outcomes end it, and how a lost attempt
 * counts. Activities are scripted fakes with the real signatures; the HTTP side is covered by
 * test/webhooks/delivery.test.ts against real receivers.
 */

type Scripted = AttemptResult['outcome'] | 'throw';

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = `delivery-${randomBytes(4).toString('hex')}`;
const scripts = new Map<string, Scripted[]>();
const attemptTimes = new Map<string, number[]>();
const recorded = new Map<string, { attempt: number; result: AttemptResult; finalStatus: DeliveryStatus | null }[]>();

const statusFor: Record<AttemptResult['outcome'], number | null> = { delivered: 200, retry: 500, failed: 400, skipped: null };

beforeAll(async () => {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Installed already in this process.
  }
  const path = process.env.TEMPORAL_TEST_SERVER_PATH;
  env = await TestWorkflowEnvironment.createTimeSkipping(path ? { server: { executable: { type: 'existing-path', path } } } : undefined);
  const bundle = process.env.WORKFLOW_BUNDLE_PATH;
  worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    ...(bundle ? { workflowBundle: { codePath: bundle } } : { workflowsPath: projectPath('workflows', 'index.ts') }),
    activities: {
      async attemptAndRecordDelivery(deliveryId: string, attempt: number, maxAttempts: number) {
        const result = await scriptedAttempt(deliveryId, attempt);
        const finalStatus = finalStatusOf(result.outcome, attempt, maxAttempts);
        record(deliveryId, attempt, result, finalStatus);
        return { result, finalStatus };
      },
      async recordOutboundAttempt(deliveryId: string, attempt: number, result: AttemptResult, finalStatus: DeliveryStatus | null) {
        record(deliveryId, attempt, result, finalStatus);
      },
    },
  });
  running = worker.run();
}, 60_000);

function record(deliveryId: string, attempt: number, result: AttemptResult, finalStatus: DeliveryStatus | null) {
  const rows = recorded.get(deliveryId) ?? [];
  rows.push({ attempt, result, finalStatus });
  recorded.set(deliveryId, rows);
}

async function scriptedAttempt(deliveryId: string, attempt: number): Promise<AttemptResult> {
  const times = attemptTimes.get(deliveryId) ?? [];
  times.push(await env.currentTimeMs());
  attemptTimes.set(deliveryId, times);
  const outcome = scripts.get(deliveryId)![attempt - 1];
  if (outcome === 'throw') throw new Error('worker lost mid-attempt');
  return { outcome, statusCode: statusFor[outcome], error: outcome === 'delivered' ? null : `scripted ${outcome}`, durationMs: 5, startedAt: new Date().toISOString() };
}

afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

async function deliver(script: Scripted[], maxAttempts?: number) {
  const deliveryId = `whd:test:${randomBytes(4).toString('hex')}`;
  scripts.set(deliveryId, script);
  const started = Date.now();
  const virtualStart = await env.currentTimeMs();
  const result = await env.client.workflow.execute<typeof deliverOutbound>('deliverOutbound', {
    workflowId: deliveryId,
    taskQueue,
    args: [{ deliveryId, maxAttempts }],
  });
  const wallMs = Date.now() - started;
  const virtualMs = (await env.currentTimeMs()) - virtualStart;
  const history = await env.client.workflow.getHandle(deliveryId).fetchHistory();
  const times = attemptTimes.get(deliveryId) ?? [];
  return {
    result,
    offsets: times.map((t) => t - times[0]),
    // The waits the workflow asked for, exactly as recorded in its history.
    timers: (history.events ?? []).flatMap((e) => {
      const timeout = e.timerStartedEventAttributes?.startToFireTimeout;
      return timeout ? [Number(timeout.seconds ?? 0) * 1000 + Math.round((timeout.nanos ?? 0) / 1e6)] : [];
    }),
    recorded: recorded.get(deliveryId) ?? [],
    // Time the test server skipped: its clock advanced this much more than the real one.
    skippedMs: virtualMs - wallMs,
  };
}

/**
 * The schedule: the workflow's timers are exactly the backoff (from its history, so a loaded
 * machine cannot blur 1, 2 and 4 s), and no attempt ran before its offset. Processing time
 * only ever makes attempts later, so there is no upper bound on the offsets.
 */
function expectSchedule(run: { offsets: number[]; timers: number[] }, expected: number[]) {
  expect(run.offsets).toHaveLength(expected.length);
  expect(run.timers).toEqual(expected.slice(1).map((offset, i) => offset - expected[i]));
  run.offsets.forEach((ms, i) => expect(ms).toBeGreaterThanOrEqual(expected[i]));
}

describe('deliverOutbound schedule', () => {
  it('delivers on the third attempt after two retryable answers, 1 s then 2 s later', async () => {
    const run = await deliver(['retry', 'retry', 'delivered']);
    expect(run.result).toEqual({ status: 'delivered', attempts: 3, statusCode: 200, error: null });
    expectSchedule(run, [0, 1000, 3000]);
    expect(run.recorded.map((r) => [r.attempt, r.result.outcome, r.finalStatus])).toEqual([
      [1, 'retry', null],
      [2, 'retry', null],
      [3, 'delivered', 'delivered'],
    ]);
  });

  it('makes four attempts at 0, 1, 3 and 7 s and then fails, without waiting in real time', async () => {
    const run = await deliver(['retry', 'retry', 'retry', 'retry']);
    expect(run.result).toEqual({ status: 'failed', attempts: 4, statusCode: 500, error: 'scripted retry' });
    expectSchedule(run, [0, 1000, 3000, 7000]);
    expect(run.recorded.map((r) => r.finalStatus)).toEqual([null, null, null, 'failed']);
    // The 7 s of backoff were skipped rather than waited out, however long the processing took.
    expect(run.skippedMs).toBeGreaterThan(3500);
  });

  it('stops at once on a non-retryable answer (4xx other than 429)', async () => {
    const run = await deliver(['failed', 'delivered']);
    expect(run.result).toEqual({ status: 'failed', attempts: 1, statusCode: 400, error: 'scripted failed' });
    expect(run.offsets).toEqual([0]);
    expect(run.recorded).toHaveLength(1);
  });

  it('stops when the target is paused or deleted', async () => {
    const run = await deliver(['retry', 'skipped', 'delivered']);
    expect(run.result.status).toBe('skipped');
    expectSchedule(run, [0, 1000]);
  });

  it('counts an attempt that never finished (worker lost) as retryable', async () => {
    const run = await deliver(['throw', 'delivered']);
    expect(run.result).toMatchObject({ status: 'delivered', attempts: 2 });
    expectSchedule(run, [0, 1000]);
    expect(run.recorded[0]).toMatchObject({ attempt: 1, finalStatus: null, result: { outcome: 'retry', statusCode: null } });
    expect(run.recorded[0].result.error).toMatch(/^attempt did not complete: /);
  });

  it('honours a smaller attempt budget (channel test sends use one)', async () => {
    const run = await deliver(['retry', 'delivered'], 1);
    expect(run.result).toMatchObject({ status: 'failed', attempts: 1 });
    expect(run.offsets).toEqual([0]);
  });

  it('never makes more than four attempts, whatever budget is asked for', async () => {
    const run = await deliver(['retry', 'retry', 'retry', 'retry', 'delivered'], 10);
    expect(run.result).toMatchObject({ status: 'failed', attempts: 4 });
  });
});

describe('deliveryLane: one workflow per target draining signalled deliveries', () => {
  const laneIds = () => `lane:test:${randomBytes(4).toString('hex')}`;
  const queued = (script: Scripted[], n: number) =>
    Array.from({ length: n }, () => {
      const deliveryId = `whd:lane:${randomBytes(5).toString('hex')}`;
      scripts.set(deliveryId, script);
      return { deliveryId, maxAttempts: 4 };
    });
  const signalLane = (workflowId: string, items: { deliveryId: string; maxAttempts: number }[]) =>
    env.client.workflow.signalWithStart<typeof deliveryLane, [typeof items]>('deliveryLane', {
      workflowId,
      taskQueue,
      args: [{ pending: [] }],
      signal: deliveriesQueuedSignal,
      signalArgs: [items],
    });
  const finalOf = (id: string) => recorded.get(id)?.find((r) => r.finalStatus)?.finalStatus;

  it('runs every signalled delivery with the same schedule, a duplicate in a later signal only once', async () => {
    const laneId = laneIds();
    const ok = queued(['delivered'], 20);
    const flaky = queued(['retry', 'retry', 'delivered'], 3);
    await signalLane(laneId, [...ok.slice(0, 10), ...flaky]);
    await signalLane(laneId, [...ok.slice(5)]); // five of these it already has
    await eventually(() => [...ok, ...flaky].every((d) => finalOf(d.deliveryId) === 'delivered'), 60_000);
    for (const d of ok) expect(attemptTimes.get(d.deliveryId)).toHaveLength(1);
    for (const d of flaky) {
      const times = attemptTimes.get(d.deliveryId)!;
      expect(times).toHaveLength(3);
      expect(times[1] - times[0]).toBeGreaterThanOrEqual(1000);
      expect(times[2] - times[1]).toBeGreaterThanOrEqual(2000);
    }
  });

  it('continues as new after a full run of deliveries, carrying the rest of its queue', async () => {
    const laneId = laneIds();
    const many = queued(['delivered'], DELIVERIES_PER_RUN + 30);
    const { signaledRunId } = await signalLane(laneId, many);
    await eventually(() => many.every((d) => finalOf(d.deliveryId) === 'delivered'), 120_000);
    for (const d of many) expect(attemptTimes.get(d.deliveryId)).toHaveLength(1);
    const firstRun = await env.client.workflow.getHandle(laneId, signaledRunId).fetchHistory();
    const last = firstRun.events?.at(-1);
    expect(last?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
    const started = firstRun.events?.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'attemptAndRecordDelivery');
    expect(started).toHaveLength(DELIVERIES_PER_RUN);
  }, 180_000);

  it('ends when idle, and the next signal starts it again', async () => {
    const laneId = laneIds();
    const first = queued(['delivered'], 2);
    await signalLane(laneId, first);
    const handle = env.client.workflow.getHandle(laneId);
    await handle.result(); // the time-skipping server fires the idle timer at once
    const history = await handle.fetchHistory();
    const idleTimers = (history.events ?? []).flatMap((e) => {
      const t = e.timerStartedEventAttributes?.startToFireTimeout;
      return t ? [Number(t.seconds ?? 0) * 1000] : [];
    });
    expect(idleTimers).toContain(LANE_IDLE_MS);
    const second = queued(['delivered'], 2);
    await signalLane(laneId, second);
    await eventually(() => second.every((d) => finalOf(d.deliveryId) === 'delivered'), 60_000);
  });
});

async function eventually(check: () => boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
