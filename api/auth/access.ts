import { forbidden, notFound, unauthorized } from '../http/errors';
import type { Sql } from '../infra/postgres';
import { ADMIN_TIER_CAPABILITIES, CAPABILITY_PERMISSION_NAME, OWNER_ACTION_CAPABILITIES, roleBeyondCredential, roleGrants, scopesGrant, tierAllowsCapability, type Capability } from './permissions';
import type { Principal, ProjectRole } from './principal';

export interface ProjectGrant {
  projectId: string;
  orgId: string;
  /** The caller's role (users) or null (project tokens). */
  role: ProjectRole | null;
}

/**
 * The single gate for project-scoped work. A caller without any access to the project gets
 * 404 (existence is not revealed); a caller with access but without the capability gets
 * 403 "Forbidden: You need '<permission>' permission" (spec 7).
 */
export class ProjectAccess {
  constructor(private readonly sql: Sql) {}

  async roleOf(userId: string, projectId: string): Promise<ProjectRole | null> {
    const [row] = await this.sql<{ role: ProjectRole }[]>`
      SELECT role FROM project_members WHERE project_id = ${projectId} AND user_id = ${userId}`;
    return row?.role ?? null;
  }

  async require(principal: Principal, projectId: string, capability: Capability): Promise<ProjectGrant> {
    if (principal.type === 'anonymous') throw unauthorized();
    const [project] = await this.sql<{ id: string; org_id: string }[]>`SELECT id, org_id FROM projects WHERE id = ${projectId}`;
    if (!project) throw notFound('Project');
    const permission = CAPABILITY_PERMISSION_NAME[capability];

    if (principal.type === 'project_api_token') {
      if (principal.projectId !== projectId) throw notFound('Project');
      if (!scopesGrant(principal.scopes, capability)) throw forbidden(`You need '${permission}' permission`);
      return { projectId, orgId: project.org_id, role: null };
    }

    const role = await this.roleOf(principal.user.id, projectId);
    if (!role) throw notFound('Project');
    if (!roleGrants(role, capability)) throw forbidden(`You need '${permission}' permission`);
    if (principal.type === 'personal_access_token') {
      if (!tierAllowsCapability(principal.tier, capability)) {
        // Spec 7: what is missing is the admin tier when the capability needs it, else write access.
        throw forbidden(ADMIN_TIER_CAPABILITIES.has(capability) ? 'personal access token lacks the admin tier' : 'personal access token is read-only');
      }
      if (OWNER_ACTION_CAPABILITIES.has(capability)) requireOwnerActions(principal);
    }
    return { projectId, orgId: project.org_id, role };
  }

  /** Every project on which the principal holds `capability` (lists that span projects). */
  async listAccessible(principal: Principal, capability: Capability): Promise<ProjectGrant[]> {
    if (principal.type === 'anonymous') return [];
    if (principal.type === 'project_api_token') {
      if (!scopesGrant(principal.scopes, capability)) return [];
      const [project] = await this.sql<{ id: string; org_id: string }[]>`SELECT id, org_id FROM projects WHERE id = ${principal.projectId}`;
      return project ? [{ projectId: project.id, orgId: project.org_id, role: null }] : [];
    }
    if (principal.type === 'personal_access_token' && !tierAllowsCapability(principal.tier, capability)) return [];
    const rows = await this.sql<{ id: string; org_id: string; role: ProjectRole }[]>`
      SELECT p.id, p.org_id, m.role FROM project_members m JOIN projects p ON p.id = m.project_id
      WHERE m.user_id = ${principal.user.id}`;
    return rows.filter((r) => roleGrants(r.role, capability)).map((r) => ({ projectId: r.id, orgId: r.org_id, role: r.role }));
  }
}

/**
 * Adding, inviting or promoting someone to `role` (issue 9): a token cannot hand out more than
 * it holds itself. Sessions are bounded by the caller's own role through ProjectAccess
 * (members:manage, members:owner).
 */
export function requireGrantable(principal: Principal, role: ProjectRole): void {
  if (principal.type === 'project_api_token') {
    const lacking = roleBeyondCredential(principal, role);
    if (lacking) throw forbidden(`You need '${CAPABILITY_PERMISSION_NAME[lacking]}' permission to grant the ${role} role`);
  } else if (principal.type === 'personal_access_token') {
    const lacking = roleBeyondCredential(principal, role);
    if (lacking) throw forbidden(ADMIN_TIER_CAPABILITIES.has(lacking) ? 'personal access token lacks the admin tier' : 'personal access token is read-only');
    if (role === 'owner') requireOwnerActions(principal);
  }
}

/** Owner actions (delete project/org, grant/demote/remove/transfer owner) with a personal token. */
export function requireOwnerActions(principal: Principal): void {
  if (principal.type === 'personal_access_token' && !(principal.tier === 'admin' && principal.allowOwnerActions)) {
    throw forbidden('this action needs an admin token created with owner actions allowed');
  }
}
