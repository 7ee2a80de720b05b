/**
 * A change request's steps as webhooks and the audit log name them
 * (docs/change-requests.md#webhooks-and-audit). Imports nothing: the webhook catalog reads it.
 */
export const CHANGE_REQUEST_EVENTS = [
  'change_request.created',
  'change_request.updated',
  'change_request.approved',
  'change_request.rejected',
  'change_request.cancelled',
  'change_request.applied',
  'change_request.failed',
] as const;
export type ChangeRequestEventName = (typeof CHANGE_REQUEST_EVENTS)[number];

/** The audit action of each step. */
export const AUDIT_ACTION_OF: Record<ChangeRequestEventName, `change_request.${string}`> = {
  'change_request.created': 'change_request.create',
  'change_request.updated': 'change_request.update',
  'change_request.approved': 'change_request.approve',
  'change_request.rejected': 'change_request.reject',
  'change_request.cancelled': 'change_request.cancel',
  'change_request.applied': 'change_request.apply',
  'change_request.failed': 'change_request.fail',
};
