import { forbidden, notFound, personalTokenRefused, unauthorized, type HttpError } from '../http/errors';
import type { Sql } from '../infra/postgres';
import {
  ADMIN_TIER_CAPABILITIES,
  CAPABILITY_PERMISSION_NAME,
  OWNER_ACTION_CAPABILITIES,
  orgRoleGrants,
  roleBeyondCredential,
  roleGrants,
  scopesGrant,
  tierAllowsCapability,
  type Capability,
  type OrgCapability,
} from './permissions';
import { actingUser, type OrgRole, type Principal, type ProjectRole } from './principal';

/**
 * The one authorization module. Every route declares who may call it next to its path: its
 * credential policy (`auth`, `sdk`, `readOnly`, `noPersonalTokens`, `adminTier`; enforced by
 * enforceCredentialPolicy before the body is read) and, for project and organization resources,
 * `access` (an AccessRule below, enforced by ProjectAccess after validation). The data plane's
 * synchronous grant, bulk items and the extra checks that depend on stored state (the owner
 * role) ask the same core, `decide`, over the one permission map in `./permissions.ts`.
 */

/**
 * Who may call a route at all, by credential:
 * - public: anyone; the principal may be anonymous (handlers decide per resource, e.g. isPublic flags).
 * - authenticated: any credential (session, personal token, project token).
 * - user: a credential acting as a user (session or personal token).
 * - session: a dashboard session only (docs/api-reference.md#personal-access-tokens,
 *   "Dashboard-only").
 */
export type AuthMode = 'public' | 'authenticated' | 'user' | 'session';

/** A route's credential policy (its RouteSpec fields of the same names). */
export interface CredentialPolicy {
  auth: AuthMode;
  /**
   * Evaluation and SDK routes: personal tokens are refused with the message of
   * docs/errors.md#permission-messages.
   */
  sdk?: boolean;
  /** A POST that only reads (explain, simulate, …): allowed for read-tier personal tokens. */
  readOnly?: boolean;
  /**
   * Personal tokens may never call this (the list in docs/api-reference.md#personal-access-tokens).
   */
  noPersonalTokens?: boolean;
  /** Needs the personal-token admin tier when called with one (org/project creation …). */
  adminTier?: boolean;
  /** The route's AccessRule (RouteSpec): a `user` route without one spans the user's whole account. */
  access?: unknown;
}

/**
 * CSRF and personal-token refusals (docs/api-reference.md#credentials), decided for every route
 * from its declared policy (before any I/O).
 */
export function enforceCredentialPolicy(policy: CredentialPolicy, p: Principal, method: string): void {
  if (policy.sdk && p.type === 'personal_access_token') throw personalTokenRefused();
  switch (policy.auth) {
    case 'public':
      break;
    case 'authenticated':
      if (p.type === 'anonymous') throw unauthorized();
      break;
    case 'user':
      if (p.type === 'anonymous') throw unauthorized();
      if (p.type === 'project_api_token') throw forbidden('project API tokens cannot call this endpoint; sign in or use a personal access token');
      break;
    case 'session':
      if (p.type === 'anonymous') throw unauthorized();
      if (p.type !== 'session') throw forbidden('personal tokens cannot do this');
      break;
  }
  // A bound project token reads its service and environment on evaluation and SDK routes only
  // (docs/api-reference.md#project-api-tokens).
  if (p.type === 'project_api_token' && p.scope && !policy.sdk && policy.auth !== 'public') throw forbidden(BOUND_TOKEN_SDK_ONLY);
  if (p.type === 'personal_access_token') {
    if (policy.noPersonalTokens) throw forbidden('personal tokens cannot do this');
    // Connector tokens reach the consented projects only, not what spans the user's account
    // (organizations, notifications, tokens across projects).
    if (p.connection && policy.auth === 'user' && policy.access === undefined) throw forbidden(CONNECTOR_PROJECTS_ONLY);
    if (p.tier === 'read' && method !== 'GET' && method !== 'HEAD' && !policy.readOnly) throw forbidden(READ_ONLY);
    if (policy.adminTier && p.tier !== 'admin') throw forbidden(NO_ADMIN_TIER);
  }
}

const READ_ONLY = 'personal access token is read-only';
const BOUND_TOKEN_SDK_ONLY = 'a project API token bound to a service and environment may only call evaluation and SDK routes';
const NO_ADMIN_TIER = 'personal access token lacks the admin tier';

export interface ProjectGrant {
  projectId: string;
  orgId: string;
  /** The caller's role (users) or null (project tokens). */
  role: ProjectRole | null;
}

/** Why the core refused. */
export type Denial = 'anonymous' | 'hidden' | 'missing' | 'read-only' | 'admin-tier' | 'owner-actions';

/**
 * The core decision, without I/O: may `principal` use `capability` on project `projectId`, where
 * `role` is the acting user's role there (null: not a member; unused for project tokens)? null
 * allows. A caller with no access at all to the project is `hidden` (answered 404: existence is
 * not revealed); access without the capability is `missing` (403,
 * docs/errors.md#permission-messages).
 */
export function decide(principal: Principal, projectId: string, role: ProjectRole | null, capability: Capability): Denial | null {
  switch (principal.type) {
    case 'anonymous':
      return 'anonymous';
    case 'project_api_token':
      if (principal.projectId !== projectId) return 'hidden';
      return scopesGrant(principal.scopes, capability) ? null : 'missing';
    default:
      if (role === null) return 'hidden';
      if (principal.type === 'personal_access_token' && principal.connection && !principal.connection.projectIds.includes(projectId)) return 'hidden';
      if (!roleGrants(role, capability)) return 'missing';
      if (principal.type === 'personal_access_token') {
        // What is missing is the admin tier when the capability needs it, else write access
        // (docs/errors.md#permission-messages).
        if (!tierAllowsCapability(principal.tier, capability)) return ADMIN_TIER_CAPABILITIES.has(capability) ? 'admin-tier' : 'read-only';
        if (OWNER_ACTION_CAPABILITIES.has(capability) && !ownerActionsAllowed(principal)) return 'owner-actions';
      }
      return null;
  }
}

/**
 * The answer to a denial (docs/errors.md#permission-messages); a `hidden` resource is reported as
 * `resource` not found.
 */
export function refusal(denial: Denial, capability: Capability, resource = 'Project'): HttpError {
  switch (denial) {
    case 'anonymous':
      return unauthorized();
    case 'hidden':
      return notFound(resource);
    case 'missing':
      return needsPermission(capability);
    case 'read-only':
      return forbidden(READ_ONLY);
    case 'admin-tier':
      return forbidden(NO_ADMIN_TIER);
    case 'owner-actions':
      return ownerActionsRefused();
  }
}

export const needsPermission = (capability: Capability) => forbidden(`You need '${CAPABILITY_PERMISSION_NAME[capability]}' permission`);

type CapabilityOf<C> = Capability | ((ctx: C) => Capability);

/**
 * Who may call a route beyond its credential policy, declared next to its path (`access` in
 * `api/http/route.ts`): the capability it needs and the resource that names the project.
 * mountRoutes has ProjectAccess check it after validation and before the handler; the grants
 * reach the handler as `ctx.granted` (one project for a single resource, any number for a list).
 *
 * - `project`: the project the request names (a path `:id`, a `projectId` in query or body).
 * - `service`: the project of the service the request names. For both, a name the request may
 *   leave out (an optional filter, undefined) stands for every project on which the caller
 *   holds the capability: possibly none, an empty list, not a refusal.
 * - `owner` + `projectOf`: the project owning a resource found by its own id (null: no such one).
 * - `per`: the handler decides each bulk item or evaluated flag through `decide` (public flags
 *   are open to anyone); nothing is checked before it.
 * - `org`: an organization the request names (or null: none, 404), by the caller's
 *   organization role (ORG_ROLE_CAPABILITIES); a member without the capability gets `refused`.
 * - `check`: a rule of its own (a public demo list, audit of a deleted project).
 * - `instance: 'admin'`: an instance administrator, a signed-in user whose verified e-mail is in
 *   ADMIN_EMAILS (the detailed health checks); anyone else gets 403.
 *
 * A resource the caller cannot see at all is answered 404 like a missing one (`hiddenAs`, the
 * resource's name, default Project; Service for `service`, the `owner` name for `owner`).
 */
export type AccessRule<C> =
  | { capability: CapabilityOf<C>; project: (ctx: C) => string | undefined; hiddenAs?: string }
  | { capability: CapabilityOf<C>; service: (ctx: C) => string | undefined }
  | { capability: CapabilityOf<C>; owner: string; projectOf: (ctx: C) => Promise<string | null> }
  | { capability: OrgCapability; org: (ctx: C) => string | Promise<string | null>; refused: string }
  | { capability: Capability; per: 'item' | 'flag' }
  | { capability: Capability; check: (principal: Principal, ctx: C) => Promise<ProjectGrant[]> }
  | { instance: 'admin' };

const capabilityOf = <C>(capability: CapabilityOf<C>, ctx: C) => (typeof capability === 'function' ? capability(ctx) : capability);

/** Project roles and resources in Postgres, answered through `decide`. */
export class ProjectAccess {
  private readonly instanceAdmins: ReadonlySet<string>;

  /** `instanceAdmins`: ADMIN_EMAILS, the instance administrators' e-mail addresses. */
  constructor(
    private readonly sql: Sql,
    instanceAdmins: readonly string[] = [],
  ) {
    this.instanceAdmins = new Set(instanceAdmins.map((e) => e.toLowerCase()));
  }

  async roleOf(userId: string, projectId: string): Promise<ProjectRole | null> {
    const [row] = await this.sql<{ role: ProjectRole }[]>`
      SELECT role FROM project_members WHERE project_id = ${projectId} AND user_id = ${userId}`;
    return row?.role ?? null;
  }

  /** `capability` on one project, or the refusal; a hidden project is reported as `resource` not found. */
  async require(principal: Principal, projectId: string, capability: Capability, resource = 'Project'): Promise<ProjectGrant> {
    if (principal.type === 'anonymous') throw unauthorized();
    if (!storable(projectId)) throw notFound(resource);
    const userId = principal.type === 'project_api_token' ? null : principal.user.id;
    const [project] = await this.sql<{ id: string; org_id: string; role: ProjectRole | null }[]>`
      SELECT p.id, p.org_id, m.role FROM projects p
      LEFT JOIN project_members m ON m.project_id = p.id AND m.user_id = ${userId}
      WHERE p.id = ${projectId}`;
    if (!project) throw notFound(resource);
    const denial = decide(principal, projectId, project.role, capability);
    if (denial) throw refusal(denial, capability, resource);
    return { projectId, orgId: project.org_id, role: userId === null ? null : project.role };
  }

  /** Every project on which the principal holds `capability` (lists that span projects). */
  async listAccessible(principal: Principal, capability: Capability): Promise<ProjectGrant[]> {
    if (principal.type === 'anonymous') return [];
    if (principal.type === 'project_api_token') {
      if (decide(principal, principal.projectId, null, capability)) return [];
      const [project] = await this.sql<{ id: string; org_id: string }[]>`SELECT id, org_id FROM projects WHERE id = ${principal.projectId}`;
      return project ? [{ projectId: project.id, orgId: project.org_id, role: null }] : [];
    }
    const rows = await this.sql<{ id: string; org_id: string; role: ProjectRole }[]>`
      SELECT p.id, p.org_id, m.role FROM project_members m JOIN projects p ON p.id = m.project_id
      WHERE m.user_id = ${principal.user.id}`;
    return rows.filter((r) => decide(principal, r.id, r.role, capability) === null).map((r) => ({ projectId: r.id, orgId: r.org_id, role: r.role }));
  }

  /** Enforces a route's rule (see AccessRule): the grants, or the refusal. */
  async check<C>(rule: AccessRule<C>, principal: Principal, ctx: C): Promise<ProjectGrant[]> {
    if ('instance' in rule) {
      this.requireInstanceAdmin(principal);
      return [];
    }
    if ('per' in rule) return [];
    if ('check' in rule) return rule.check(principal, ctx);
    if ('org' in rule) {
      if (principal.type === 'anonymous') throw unauthorized();
      await this.requireOrg(principal, await rule.org(ctx), rule.capability, rule.refused);
      return [];
    }
    const capability = capabilityOf(rule.capability, ctx);
    const named = 'project' in rule ? rule.project(ctx) : 'service' in rule ? rule.service(ctx) : '';
    if (named === undefined) return this.listAccessible(principal, capability);
    if ('project' in rule) return [await this.require(principal, named, capability, rule.hiddenAs)];
    if ('service' in rule) return [await this.requireOnService(principal, named, capability)];
    if (principal.type === 'anonymous') throw unauthorized();
    return [await this.requireOwned(principal, await rule.projectOf(ctx), capability, rule.owner)];
  }

  /** A verified address only: anyone can sign up with an unverified one. */
  private requireInstanceAdmin(principal: Principal): void {
    if (principal.type === 'anonymous') throw unauthorized();
    const user = actingUser(principal);
    if (isConnector(principal)) throw forbidden(CONNECTOR_PROJECTS_ONLY);
    if (!user?.emailVerified || !this.instanceAdmins.has(user.email.toLowerCase())) {
      throw forbidden('only instance administrators (ADMIN_EMAILS) may see this');
    }
  }

  /** `capability` on the project of a service (routes, bulk items); a service the caller cannot see is 404 like a missing one. */
  async requireOnService(principal: Principal, serviceId: string, capability: Capability): Promise<ProjectGrant> {
    if (principal.type === 'anonymous') throw unauthorized();
    if (!storable(serviceId)) throw notFound('Service');
    const [row] = await this.sql<{ project_id: string }[]>`SELECT project_id FROM services WHERE id = ${serviceId}`;
    return this.requireOwned(principal, row?.project_id ?? null, capability, 'Service');
  }

  /** `capability` in an organization: the caller's role there; a non-member gets 404 (existence is not revealed). */
  async requireOrg(principal: Principal, orgId: string | null, capability: OrgCapability, refused: string): Promise<OrgRole> {
    if (principal.type === 'anonymous') throw unauthorized();
    const user = actingUser(principal);
    if (!user) throw forbidden('organizations are reached by their users; use a signed-in session or a personal access token');
    if (isConnector(principal)) throw forbidden(CONNECTOR_PROJECTS_ONLY);
    if (orgId === null || !storable(orgId)) throw notFound('Organization');
    const [row] = await this.sql<{ role: OrgRole }[]>`SELECT role FROM org_members WHERE org_id = ${orgId} AND user_id = ${user.id}`;
    if (!row) throw notFound('Organization');
    if (!orgRoleGrants(row.role, capability)) throw forbidden(refused);
    return row.role;
  }

  private async requireOwned(principal: Principal, projectId: string | null, capability: Capability, resource: string): Promise<ProjectGrant> {
    if (projectId === null) throw notFound(resource);
    return this.require(principal, projectId, capability, resource);
  }
}

/**
 * Adding, inviting or promoting someone to `role`: a token cannot hand out more than
 * it holds itself. Sessions are bounded by the caller's own role through the route's rule
 * (members:manage) and members:owner.
 */
export function requireGrantable(principal: Principal, role: ProjectRole): void {
  if (principal.type === 'project_api_token') {
    const lacking = roleBeyondCredential(principal, role);
    if (lacking) throw forbidden(`You need '${CAPABILITY_PERMISSION_NAME[lacking]}' permission to grant the ${role} role`);
  } else if (principal.type === 'personal_access_token') {
    const lacking = roleBeyondCredential(principal, role);
    if (lacking) throw refusal(ADMIN_TIER_CAPABILITIES.has(lacking) ? 'admin-tier' : 'read-only', lacking);
    if (role === 'owner' && !ownerActionsAllowed(principal)) throw ownerActionsRefused();
  }
}

/** A connector token (`mcp_`): it reaches the consented projects only, never organizations or the instance. */
const isConnector = (principal: Principal) => principal.type === 'personal_access_token' && principal.connection !== undefined;
const CONNECTOR_PROJECTS_ONLY = 'connector tokens reach only the projects consented to';

/** Postgres text holds no NUL: an id with one names nothing (and must not reach a query). */
const storable = (id: string) => !id.includes('\u0000');

/** Owner actions (delete project/org, grant/demote/remove/transfer owner) with a personal token. */
function ownerActionsAllowed(principal: Principal): boolean {
  return principal.type !== 'personal_access_token' || (principal.tier === 'admin' && principal.allowOwnerActions);
}

const ownerActionsRefused = () => forbidden('this action needs an admin token created with owner actions allowed');
