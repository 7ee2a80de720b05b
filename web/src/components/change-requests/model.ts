/**
 * Change requests (docs/change-requests.md): their shapes, the words the console
 * uses for them, and why an action is unavailable. The API decides what a caller may do (each
 * request's `actions`); the reasons here only word a refusal it already made.
 */
import type { paths } from '../../api/client';
import type { Environment } from '../../api/environments';

export type ChangeRequest = paths['/api/projects/{id}/change-requests/{requestId}']['get']['responses'][200]['content']['application/json'];
export type ChangeRequestStatus = ChangeRequest['status'];
export type Change = ChangeRequest['changes'][number];
/** A change as a new request carries it (baseVersion: the version the author saw). */
export type NewChange = NonNullable<paths['/api/projects/{id}/change-requests']['post']['requestBody']>['content']['application/json']['changes'][number];
export type ChangePolicy = paths['/api/projects/{id}/change-policy']['get']['responses'][200]['content']['application/json'];
type ApproverRole = NonNullable<ChangePolicy['environments'][Environment]>['approverRoles'][number];

export const STATUSES: readonly ChangeRequestStatus[] = ['pending', 'approved', 'scheduled', 'applied', 'rejected', 'cancelled', 'failed'];
export const APPROVER_ROLES: readonly ApproverRole[] = ['owner', 'admin', 'member'];
/** Nothing can happen to a request in these any more. */
const FINAL: readonly ChangeRequestStatus[] = ['applied', 'rejected', 'cancelled', 'failed'];
export const isFinal = (request: ChangeRequest) => FINAL.includes(request.status);

export const STATUS_WORDS: Record<ChangeRequestStatus, string> = {
  pending: 'Pending',
  approved: 'Approved',
  scheduled: 'Scheduled',
  applied: 'Applied',
  rejected: 'Rejected',
  cancelled: 'Cancelled',
  failed: 'Failed',
};

const ACTION_WORDS: Record<Change['action'], string> = { create: 'Create', update: 'Update', toggle: 'Toggle', delete: 'Delete' };

/** "Update new-checkout in production"; a toggle says which way. */
export function describeChange(change: Pick<Change, 'action' | 'flagKey' | 'environment'> & { body?: unknown }): string {
  const enabled = (change.body as { enabled?: unknown } | undefined)?.enabled;
  const verb = change.action === 'toggle' && typeof enabled === 'boolean' ? (enabled ? 'Enable' : 'Disable') : ACTION_WORDS[change.action];
  return `${verb} ${change.flagKey} in ${change.environment}`;
}

/** The environments a request touches, in the order its changes name them. */
export const environmentsOf = (request: ChangeRequest) => [...new Set(request.changes.map((c) => c.environment))];

export const changeRequestHref = (projectId: string, requestId: string) => `/projects/${encodeURIComponent(projectId)}/change-requests/${encodeURIComponent(requestId)}`;

const roleList = (roles: readonly string[]) => (roles.length > 1 ? `${roles.slice(0, -1).join(', ')} or ${roles[roles.length - 1]}` : (roles[0] ?? 'no'));
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

interface Caller {
  userId?: string;
  role?: string;
}

/** Why the caller cannot approve or reject (the API said so through `actions`). */
export function whyNotReview(request: ChangeRequest, caller: Caller, verb: 'approve' | 'reject'): string {
  if (isFinal(request)) return `This request is ${request.status}: it can no longer be reviewed.`;
  if (verb === 'approve' && request.status !== 'pending') return `This request is ${request.status}: it has the approvals it needs.`;
  if (request.requiredApprovals === 0) return 'This request needs no approval.';
  if (request.createdBy === caller.userId && !request.allowSelfApproval) return `You opened this request, and the change policy does not let authors ${verb} their own.`;
  if (verb === 'approve' && request.approvals.some((a) => a.userId === caller.userId)) return 'You have approved this request already.';
  if (!caller.role || !request.approverRoles.includes(caller.role as ApproverRole))
    return `Reviewing needs the ${roleList(request.approverRoles)} role in this project${caller.role ? `; yours is ${caller.role}` : ''}.`;
  return `You cannot ${verb} this request.`;
}

export function whyNotApply(request: ChangeRequest): string {
  if (isFinal(request)) return `This request is ${request.status}.`;
  const missing = request.requiredApprovals - request.approvals.length;
  if (request.status === 'pending' && missing > 0) return `It needs ${plural(missing, 'more approval')} first.`;
  return 'Applying needs the member, admin or owner role in this project.';
}

export function whyNotCancel(request: ChangeRequest): string {
  if (isFinal(request)) return `This request is ${request.status}.`;
  return 'Only its author, an owner or an admin can cancel it.';
}

export const approvalsLine = (request: ChangeRequest) =>
  request.requiredApprovals === 0 ? 'Needs no approval.' : `${request.approvals.length} of ${plural(request.requiredApprovals, 'required approval')}.`;
