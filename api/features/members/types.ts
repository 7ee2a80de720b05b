import type { ProjectRole } from '../../auth/principal';

export const PROJECT_ROLES = ['owner', 'admin', 'member', 'viewer'] as const satisfies readonly ProjectRole[];

/**
 * A project member (docs/api-reference.md#members-and-invitations: userId and role) with the user's
 * name and e-mail for display.
 */
export interface MemberRecord {
  projectId: string;
  userId: string;
  email: string;
  name: string;
  role: ProjectRole;
  createdAt: string;
  updatedAt: string;
}
