import { condition, continueAsNew, setHandler } from '@temporalio/workflow';
import { deliveriesQueuedSignal, type DeliveryLaneInput, type QueuedDelivery } from './messages';
import { runDelivery } from './webhook-delivery';

/** Deliveries of one target attempted at once: a slow receiver holds back only its own lane. */
export const LANE_CONCURRENCY = 32;
/** Deliveries started per run before continuing as new, which keeps the event history bounded. */
export const DELIVERIES_PER_RUN = 200;
/** An idle lane ends; the next dispatch starts it again (signal-with-start). */
export const LANE_IDLE_MS = 60_000;

/**
 * One long-lived workflow per delivery target (webhook or alert channel). Dispatchers store
 * deliveries as pending, then signal the lane (starting it when it is not running) with their
 * ids; the lane runs each with the one attempt schedule (runDelivery: 4 attempts, 0/1/2/4 s),
 * up to LANE_CONCURRENCY at once. Many deliveries then share workflow tasks instead of each
 * paying for a workflow start of its own, which is what lets delivery keep pace with a burst.
 *
 * A delivery signalled twice (a dispatcher re-handling an event after a crash) runs once per
 * run; one that finished in an earlier run is skipped by its attempt activity (it is no
 * longer pending), so redelivery after a crash is at least once, never a fresh schedule.
 */
export async function deliveryLane(input: DeliveryLaneInput): Promise<void> {
  const queue: QueuedDelivery[] = [];
  const known = new Set<string>();
  const enqueue = (items: QueuedDelivery[]) => {
    for (const item of items) {
      if (known.has(item.deliveryId)) continue;
      known.add(item.deliveryId);
      queue.push(item);
    }
  };
  enqueue(input.pending);
  setHandler(deliveriesQueuedSignal, enqueue);

  let running = 0;
  let started = 0;
  const canStart = () => queue.length > 0 && running < LANE_CONCURRENCY && started < DELIVERIES_PER_RUN;
  for (;;) {
    while (canStart()) {
      const next = queue.shift()!;
      running++;
      started++;
      runDelivery(next.deliveryId, next.maxAttempts)
        // Bookkeeping that kept failing (Postgres away for minutes): the delivery is still
        // pending, so it goes round again rather than being forgotten.
        .catch(() => queue.push(next))
        .finally(() => running--);
    }
    if (started >= DELIVERIES_PER_RUN) {
      await condition(() => running === 0);
      await continueAsNew<typeof deliveryLane>({ pending: queue });
    }
    if (queue.length === 0 && running === 0) {
      if (!(await condition(() => queue.length > 0, LANE_IDLE_MS))) return;
      continue;
    }
    await condition(() => canStart() || running === 0);
  }
}
