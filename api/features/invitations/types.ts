export const INVITABLE_ROLES = ['admin', 'member', 'viewer'] as const;
export type InvitableRole = (typeof INVITABLE_ROLES)[number];
export const INVITATION_STATUSES = ['pending', 'accepted', 'cancelled', 'expired'] as const;
export type InvitationStatus = (typeof INVITATION_STATUSES)[number];

/**
 * An invitation as the API returns it (docs/api-reference.md#members-and-invitations); the token is
 * only ever mailed.
 */
export interface InvitationRecord {
  id: string;
  projectId: string;
  email: string;
  role: InvitableRole;
  status: InvitationStatus;
  invitedBy: string | null;
  acceptedBy: string | null;
  createdAt: string;
  expiresAt: string;
  settledAt: string | null;
}

/**
 * 7 days (docs/limits.md). The Temporal timer in workflows/invitation-expiry.ts uses the same
 * lifetime.
 */
export const INVITATION_LIFETIME_MS = 7 * 24 * 3600_000;
