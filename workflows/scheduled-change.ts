import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import { cancelScheduledChangeSignal, rescheduleChangeSignal, type ScheduledChangeActivities, type ScheduledChangeInput, type ScheduledChangeResult } from './messages';

const { fireScheduledChange } = proxyActivities<ScheduledChangeActivities>({
  startToCloseTimeout: '2 minutes',
  // A conflict is an answer, not an error; errors are the database being away: retry until it is back.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * One workflow per scheduled change request (id `change-request-<requestId>`,
 * docs/change-requests.md#scheduled-changes): a durable timer for the request's time. Reschedule
 * and cancel are signals to this same workflow. The database stays the source of truth: the
 * activity applies only a request still scheduled for the time this timer fired at, in the
 * transaction that marks it applied, so a retried activity or a stale timer never applies twice.
 */
export async function scheduledChange(input: ScheduledChangeInput): Promise<ScheduledChangeResult> {
  let at = input.at;
  let cancelled = false;
  setHandler(rescheduleChangeSignal, (next) => {
    at = next;
  });
  setHandler(cancelScheduledChangeSignal, () => {
    cancelled = true;
  });
  for (;;) {
    const armed = at;
    const wait = Math.max(0, Date.parse(armed) - Date.now());
    const woken = await condition(() => cancelled || at !== armed, wait);
    if (cancelled) return 'cancelled';
    if (!woken) return fireScheduledChange({ requestId: input.requestId, at: armed });
  }
}
