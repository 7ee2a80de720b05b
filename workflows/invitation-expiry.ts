import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import { invitationSettledSignal, type InvitationActivities, type InvitationExpiryInput, type InvitationExpiryResult } from './messages';

/**
 * An invitation expires 7 days after creation (docs/api-reference.md#members-and-invitations,
 * docs/limits.md).
 */
export const INVITATION_LIFETIME = '7 days';

const { expireInvitation } = proxyActivities<InvitationActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/**
 * One workflow per invitation (id `invitation-expiry-<invitationId>`): a durable 7-day timer
 * that marks the invitation expired, unless it is settled first. The database stays the source
 * of truth: accepting checks `expires_at` itself, and the activity only moves a pending row.
 */
export async function invitationExpiry(input: InvitationExpiryInput): Promise<InvitationExpiryResult> {
  let settled = false;
  setHandler(invitationSettledSignal, () => {
    settled = true;
  });
  if (await condition(() => settled, INVITATION_LIFETIME)) return 'settled';
  await expireInvitation(input.invitationId);
  return 'expired';
}
