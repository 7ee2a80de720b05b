import { patched, proxyActivities, sleep } from '@temporalio/workflow';
import { finalStatusOf, type AttemptResult, type DeliverOutboundInput, type DeliverOutboundResult, type DeliveryActivities, type RecordedAttempt } from './messages';

/**
 * At most 4 attempts, made 0, 1, 2 and 4 seconds after the previous one failed (7 s of waiting in
 * all; docs/limits.md#time-windows-and-lifetimes). The waits are durable workflow timers, so a
 * worker that stops during a backoff loses nothing: another worker fires the timer and makes the
 * next attempt.
 */
export const DELIVERY_DELAYS_MS = [0, 1_000, 2_000, 4_000] as const;
export const MAX_DELIVERY_ATTEMPTS = DELIVERY_DELAYS_MS.length;

// One activity execution per attempt (no activity-level retry): the workflow owns the schedule,
// so it stays deterministic and every attempt is recorded. The budget covers the 10 s HTTP
// timeout plus loading the target and the SSRF check.
const { attemptOutboundDelivery, attemptAndRecordDelivery } = proxyActivities<DeliveryActivities>({
  startToCloseTimeout: '20 seconds',
  retry: { maximumAttempts: 1 },
});

// Recording is pure bookkeeping in Postgres: retried until it lands.
const { recordOutboundAttempt } = proxyActivities<DeliveryActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 20 },
});

/**
 * Delivers one stored delivery (webhook event or alert); the payload and target stay in Postgres.
 * A receiver that refuses or stays down is a business outcome, not a workflow failure: the
 * workflow completes with status `failed`, and the delivery log says why. New deliveries run in
 * their target's lane (deliveryLane); this workflow stays registered so executions started by
 * earlier versions finish.
 */
export async function deliverOutbound(input: DeliverOutboundInput): Promise<DeliverOutboundResult> {
  return runDelivery(input.deliveryId, input.maxAttempts);
}

/**
 * The attempt schedule of one delivery, shared by deliverOutbound and the per-target lanes
 * (workflows/delivery-lane.ts) that run many of them side by side.
 */
export async function runDelivery(deliveryId: string, requestedAttempts: number | undefined): Promise<DeliverOutboundResult> {
  const maxAttempts = Math.max(1, Math.min(requestedAttempts ?? MAX_DELIVERY_ATTEMPTS, MAX_DELIVERY_ATTEMPTS));
  for (let attempt = 1; ; attempt++) {
    const delay = DELIVERY_DELAYS_MS[attempt - 1];
    if (delay > 0) await sleep(delay);
    // Executions started before attempts recorded themselves keep their two-activity history.
    const { result, finalStatus } = patched(ATTEMPTS_RECORD_THEMSELVES)
      ? await attemptAndRecord(deliveryId, attempt, maxAttempts)
      : await attemptThenRecord(deliveryId, attempt, maxAttempts);
    if (finalStatus) return { status: finalStatus, attempts: attempt, statusCode: result.statusCode, error: result.error };
  }
}

const ATTEMPTS_RECORD_THEMSELVES = 'attempts-record-themselves';

async function attemptAndRecord(deliveryId: string, attempt: number, maxAttempts: number): Promise<RecordedAttempt> {
  try {
    return await attemptAndRecordDelivery(deliveryId, attempt, maxAttempts);
  } catch (error) {
    // Lost before its outcome was recorded (the HTTP call may or may not have happened): retried
    // like a timeout, so a receiver may see this delivery id twice, never zero times.
    return record(deliveryId, attempt, maxAttempts, lostAttempt(error));
  }
}

async function attemptThenRecord(deliveryId: string, attempt: number, maxAttempts: number): Promise<RecordedAttempt> {
  let result: AttemptResult;
  try {
    result = await attemptOutboundDelivery(deliveryId, attempt);
  } catch (error) {
    result = lostAttempt(error);
  }
  return record(deliveryId, attempt, maxAttempts, result);
}

async function record(deliveryId: string, attempt: number, maxAttempts: number, result: AttemptResult): Promise<RecordedAttempt> {
  const finalStatus = finalStatusOf(result.outcome, attempt, maxAttempts);
  await recordOutboundAttempt(deliveryId, attempt, result, finalStatus);
  return { result, finalStatus };
}

/** The attempt itself did not finish (worker lost, activity timed out): retryable like a timeout. */
function lostAttempt(error: unknown): AttemptResult {
  return {
    outcome: 'retry',
    statusCode: null,
    error: `attempt did not complete: ${(error as Error).message}`,
    durationMs: null,
    startedAt: new Date().toISOString(),
  };
}
