import type { ChangeRequestService } from '../api/features/change-requests/service';
import type { ScheduledChangeActivities } from '../workflows/messages';

/** What the scheduled apply runs with; optional so a worker started for other workflows alone (tests) still starts. */
export interface ChangeRequestDeps {
  changeRequests?: Pick<ChangeRequestService, 'fire'>;
}

/**
 * The scheduledChange workflow's one side effect: the apply at the request's time. Safe under
 * retry: the request is marked applied in the transaction that writes its flags, and a request no
 * longer scheduled for that time is skipped (ChangeRequestService.fire).
 */
export function createChangeRequestActivities({ changeRequests }: ChangeRequestDeps): ScheduledChangeActivities {
  return {
    async fireScheduledChange({ requestId, at }) {
      if (!changeRequests) throw new Error('this worker was started without the change request dependencies');
      return changeRequests.fire(requestId, at);
    },
  };
}
