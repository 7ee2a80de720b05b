/**
 * What the signed-in user's roles let them do (in settings, and creating or changing flags and
 * services), to hide or disable controls ahead of time. Only a hint: the API decides (api/auth/permissions.ts is the authority and this mirrors
 * its role map); a refused call still shows the server's 403 message.
 */
import { useSession } from '../../session';

type ProjectRole = 'owner' | 'admin' | 'member' | 'viewer';
type Capability = 'members:manage' | 'members:owner' | 'settings:manage' | 'flags:write' | 'services:write';

const ROLE_CAN: Record<ProjectRole, readonly Capability[]> = {
  owner: ['members:manage', 'members:owner', 'settings:manage', 'flags:write', 'services:write'],
  admin: ['members:manage', 'settings:manage', 'flags:write', 'services:write'],
  member: ['flags:write', 'services:write'],
  viewer: [],
};

/** Why a control is unavailable, worded for the person who cannot use it. */
export const NEEDS = {
  'members:manage': 'Managing members needs the owner or admin role in this project.',
  'members:owner': 'Only an owner can grant, change or remove the owner role.',
  'settings:manage': 'Managing API tokens and webhooks needs the owner or admin role in this project.',
  'flags:write': 'Managing triggers needs the member, admin or owner role in this project.',
  'change-policy': 'Changing the change policy needs the owner or admin role in this project.',
  'org:manage': "Managing alert channels needs the owner or admin role in the project's organization.",
  // Only viewers lack flags:write and services:write, so these name them.
  'flags:create': 'Viewers cannot create flags: that needs the member, admin or owner role in this project.',
  'flags:change': 'Viewers cannot change flags: switching or editing one needs the member, admin or owner role in this project.',
  'services:write': 'Viewers cannot create services: that needs the member, admin or owner role in this project.',
} as const;

export function useProjectAccess(projectId: string) {
  const session = useSession();
  const project = session.projects.find((p) => p.id === projectId);
  const role = (project?.role ?? undefined) as ProjectRole | undefined;
  const org = session.orgs.find((o) => o.id === project?.orgId);
  return {
    project,
    role,
    /** The project's organization; its role is absent when the project was only shared with the user. */
    org,
    userId: session.user?.id,
    can: (capability: Capability) => !!role && ROLE_CAN[role].includes(capability),
    canManageOrg: org?.role === 'owner' || org?.role === 'admin',
  };
}
