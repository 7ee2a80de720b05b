import type { TokenBinding } from '../domain/token-binding';

/** Who is calling. Resolved once per request by the authenticator, then read everywhere. */

export interface UserRecord {
  id: string;
  email: string;
  name: string;
  emailVerified: boolean;
  createdAt: string;
}

export type ProjectRole = 'owner' | 'admin' | 'member' | 'viewer';
export type OrgRole = 'owner' | 'admin' | 'member';
export type TokenScope = 'read' | 'write' | 'delete' | 'manage_settings' | 'manage_members';
export type PersonalTokenTier = 'read' | 'write' | 'admin';

export interface AnonymousPrincipal {
  type: 'anonymous';
}

export interface SessionPrincipal {
  type: 'session';
  user: UserRecord;
  sessionId: string;
  csrfToken: string;
}

export interface ProjectTokenPrincipal {
  type: 'project_api_token';
  tokenId: string;
  tokenType: 'opaque' | 'jwt';
  projectId: string;
  scopes: TokenScope[];
  /** The user who created the token; audit entries name them with the token. */
  createdBy: string | null;
  /**
   * Set for a bound token (docs/api-reference.md#project-api-tokens): it reads only this service and
   * environment, on evaluation and SDK routes only. Null (or absent) for an unbound token.
   */
  scope?: TokenBinding | null;
}

export interface PersonalTokenPrincipal {
  type: 'personal_access_token';
  tokenId: string;
  user: UserRecord;
  tier: PersonalTokenTier;
  allowOwnerActions: boolean;
  /**
   * Set for connector tokens (`mcp_`, docs/api-reference.md#connector-tokens): they act as the user
   * exactly like a personal token of tier `read` or `write` (refused wherever personal tokens are),
   * and only on the projects consented to on this OAuth connection.
   */
  connection?: ConnectorGrant;
}

export interface ConnectorGrant {
  id: string;
  projectIds: readonly string[];
}

export type Principal = AnonymousPrincipal | SessionPrincipal | ProjectTokenPrincipal | PersonalTokenPrincipal;

export const ANONYMOUS: AnonymousPrincipal = { type: 'anonymous' };

/** The user a principal acts as, when it acts as one. */
export function actingUser(p: Principal): UserRecord | null {
  return p.type === 'session' || p.type === 'personal_access_token' ? p.user : null;
}

/** `credential` of GET /api/users/me (docs/api-reference.md#accounts-and-sessions). */
export function describeCredential(p: Principal): Record<string, unknown> {
  switch (p.type) {
    case 'session':
      return { type: 'session' };
    case 'personal_access_token':
      if (p.connection) return { type: 'connector_token', id: p.connection.id, scope: p.tier, projectIds: p.connection.projectIds };
      return { type: 'personal_access_token', id: p.tokenId, tier: p.tier, allowOwnerActions: p.allowOwnerActions };
    case 'project_api_token':
      return p.scope
        ? { type: 'project_api_token', id: p.tokenId, tokenType: p.tokenType, scopes: p.scopes, projectId: p.projectId, scope: p.scope }
        : { type: 'project_api_token', id: p.tokenId, tokenType: p.tokenType, scopes: p.scopes, projectId: p.projectId };
    default:
      return { type: 'anonymous' };
  }
}
