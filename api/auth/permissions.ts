import type { OrgRole, PersonalTokenTier, ProjectRole, TokenScope } from './principal';

/**
 * The one permission map (docs/api-reference.md#roles-and-capabilities). Roles, project-token
 * scopes and opaque permissions all reduce to capabilities; every endpoint names the capability it
 * needs and nothing else decides access.
 */
export const CAPABILITIES = [
  'flags:read',
  'flags:write',
  'flags:delete',
  'services:read',
  'services:write',
  'services:delete',
  'members:view',
  'members:manage',
  'settings:manage',
  'project:delete',
  // Owner-only: grant, demote, remove or transfer the owner role; change the project slug.
  'members:owner',
  'settings:slug',
] as const;
export type Capability = (typeof CAPABILITIES)[number];

const ALL = new Set<Capability>(CAPABILITIES);
const OWNER_ONLY = new Set<Capability>(['project:delete', 'members:owner', 'settings:slug']);

export const ROLE_CAPABILITIES: Record<ProjectRole, ReadonlySet<Capability>> = {
  owner: ALL,
  admin: new Set(CAPABILITIES.filter((c) => !OWNER_ONLY.has(c))),
  member: new Set<Capability>(['flags:read', 'flags:write', 'services:read', 'services:write', 'members:view']),
  viewer: new Set<Capability>(['flags:read', 'services:read', 'members:view']),
};

/** Project API tokens: opaque `permissions.{read,write,delete}` map onto the same scopes as JWT. */
export const SCOPE_CAPABILITIES: Record<TokenScope, readonly Capability[]> = {
  read: ['flags:read', 'services:read'],
  write: ['flags:write'],
  delete: ['flags:delete'],
  manage_settings: ['settings:manage'],
  manage_members: ['members:manage', 'members:view'],
};

/** The permission word used in "Forbidden: You need '<permission>' permission" (docs/errors.md). */
export const CAPABILITY_PERMISSION_NAME: Record<Capability, string> = {
  'flags:read': 'read',
  'flags:write': 'write',
  'flags:delete': 'delete',
  'services:read': 'read',
  'services:write': 'write',
  'services:delete': 'delete',
  // Every role may view members; only project tokens can lack it, and they get it from manage_members.
  'members:view': 'manage_members',
  'members:manage': 'manage_members',
  'settings:manage': 'manage_settings',
  'project:delete': 'delete_project',
  'members:owner': 'manage_owners',
  'settings:slug': 'change_slug',
};

/**
 * Capabilities that need the personal-token admin tier
 * (docs/api-reference.md#personal-access-tokens).
 */
export const ADMIN_TIER_CAPABILITIES: ReadonlySet<Capability> = new Set(['members:manage', 'settings:manage', 'project:delete', 'members:owner', 'settings:slug']);

/**
 * Owner actions (docs/api-reference.md#personal-access-tokens): with a personal token they also
 * need `allowOwnerActions`.
 */
export const OWNER_ACTION_CAPABILITIES: ReadonlySet<Capability> = new Set(['project:delete', 'members:owner']);

export function roleGrants(role: ProjectRole, capability: Capability): boolean {
  return ROLE_CAPABILITIES[role].has(capability);
}

export function scopesGrant(scopes: readonly TokenScope[], capability: Capability): boolean {
  return scopes.some((s) => SCOPE_CAPABILITIES[s].includes(capability));
}

export function tierAllowsCapability(tier: PersonalTokenTier, capability: Capability): boolean {
  if (ADMIN_TIER_CAPABILITIES.has(capability)) return tier === 'admin';
  if (capability.endsWith(':read') || capability === 'members:view') return true;
  return tier === 'write' || tier === 'admin';
}

/**
 * The first capability of `role` that a credential does not hold, or null: a credential grants
 * only what it holds. A project token holds its scopes, compared by permission word
 * ('read', 'write' ...) since roles also cover services, which no scope names; the owner role
 * has words no scope has. A personal token holds what its tier allows.
 */
export function roleBeyondCredential(credential: { scopes: readonly TokenScope[] } | { tier: PersonalTokenTier }, role: ProjectRole): Capability | null {
  for (const capability of ROLE_CAPABILITIES[role]) {
    const held =
      'scopes' in credential
        ? scopesGrant(credential.scopes, capability) || credential.scopes.includes(CAPABILITY_PERMISSION_NAME[capability] as TokenScope)
        : tierAllowsCapability(credential.tier, capability);
    if (!held) return capability;
  }
  return null;
}

/**
 * Organizations (docs/api-reference.md#organizations) have their own roles: every member views what
 * belongs to the organization (its alert channels); owners and admins manage it (create projects in
 * it, manage alert channels, read the audit trail of its deleted projects).
 */
export type OrgCapability = 'org:view' | 'org:manage';

export const ORG_ROLE_CAPABILITIES: Record<OrgRole, ReadonlySet<OrgCapability>> = {
  owner: new Set(['org:view', 'org:manage']),
  admin: new Set(['org:view', 'org:manage']),
  member: new Set(['org:view']),
};

export function orgRoleGrants(role: OrgRole, capability: OrgCapability): boolean {
  return ORG_ROLE_CAPABILITIES[role].has(capability);
}

export function opaquePermissionsToScopes(p: { read?: boolean; write?: boolean; delete?: boolean }): TokenScope[] {
  const scopes: TokenScope[] = [];
  if (p.read) scopes.push('read');
  if (p.write) scopes.push('write');
  if (p.delete) scopes.push('delete');
  return scopes;
}
