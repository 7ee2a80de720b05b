import { decide, refusal, type Denial } from '../../auth/access';
import type { Principal, ProjectRole } from '../../auth/principal';
import type { Environment } from '../../domain/environments';
import { notFound, personalTokenRefused, unauthorized, type HttpError } from '../../http/errors';
import type { ServiceSnapshot, SnapshotStore, Visibility } from './snapshots';

/**
 * Which services are public demo services (docs/api-reference.md#demo-service): config ids plus the
 * ones seeded at start.
 */
export interface DemoServices {
  isDemo(serviceId: string): boolean;
  list(): string[];
}

export class DemoServiceRegistry implements DemoServices {
  private readonly ids: Set<string>;

  constructor(configured: readonly string[]) {
    this.ids = new Set(configured);
  }

  add(...serviceIds: string[]): void {
    for (const id of serviceIds) this.ids.add(id);
  }

  isDemo(serviceId: string): boolean {
    return this.ids.has(serviceId);
  }

  list(): string[] {
    return [...this.ids];
  }
}

/** The result of authorizing a caller for one service: what it may see, and why not more. */
export interface ServiceGrant {
  service: ServiceSnapshot;
  visibility: Visibility;
  demo: boolean;
  /** Thrown when the caller asks for a flag outside its visibility. */
  denial: () => HttpError;
  /** The snapshot was already in memory (no load was needed): `_debug.cacheHit`. */
  cacheHit: boolean;
  /**
   * The caller reads the service in its own right (a read token or a member's session of its
   * project): only such callers spend the per-service budget. Anonymous callers and tokens of
   * other projects are held by the per-IP limit, so they cannot exhaust a tenant's budget.
   */
  reader: boolean;
}

const MEMBERSHIP_TTL_MS = 5_000;

// Denials are shared functions, so a grant allocates no closure (it is built per request).
const hiddenFlag = () => notFound('Flag');
const DENIALS: Record<Denial, () => HttpError> = {
  anonymous: () => refusal('anonymous', 'flags:read'),
  hidden: () => refusal('hidden', 'flags:read', 'Service'),
  missing: () => refusal('missing', 'flags:read'),
  'read-only': () => refusal('read-only', 'flags:read'),
  'admin-tier': () => refusal('admin-tier', 'flags:read'),
  'owner-actions': () => refusal('owner-actions', 'flags:read'),
};

/**
 * Who may evaluate what (docs/data-plane.md#who-may-evaluate-accessts,
 * docs/api-reference.md#roles-and-capabilities): public flags need no credential; every other flag
 * needs a project API token of the service's project with `read`, or a session of a project member.
 * Demo services are open to everyone. Personal access tokens never evaluate (5.5).
 *
 * A caller without read access sees only public flags. Asking for anything else is 401 for
 * an anonymous caller (it may have access with a credential), 403 for a token of the project
 * without `read`, and 404 for a caller with no access to the project (existence is not
 * revealed, as everywhere else). A missing flag counts as "anything else" unless the caller
 * may read the service, so anonymous callers cannot probe for flag keys.
 *
 * The decision is the one every route makes (`decide` in api/auth/access.ts, flags:read on the
 * service's project). Project tokens are decided without I/O. Session memberships are cached
 * for 5 s per (user, project), so a removed member keeps evaluation access at most that long.
 */
export class EvaluationAccess {
  private readonly memberships = new Map<string, { role: ProjectRole | null; until: number }>();

  constructor(
    private readonly deps: {
      snapshots: SnapshotStore;
      demo: DemoServices;
      /** The user's role on a project (ProjectAccess.roleOf). */
      roleOf: (userId: string, projectId: string) => Promise<ProjectRole | null>;
    },
  ) {}

  /** Authorizes `principal` for a service; throws for unknown services and personal tokens. */
  async grant(principal: Principal, serviceId: string): Promise<ServiceGrant> {
    if (principal.type === 'personal_access_token') throw personalTokenRefused();
    if (principal.type === 'project_api_token' && principal.scope && principal.scope.serviceId !== serviceId) throw DENIALS.hidden();
    let service = this.deps.snapshots.get(serviceId);
    const cacheHit = service !== undefined;
    if (service === undefined) service = (await this.deps.snapshots.resolve(serviceId)) ?? undefined;
    if (service === undefined) {
      if (principal.type === 'anonymous') throw unauthorized();
      throw notFound('Service');
    }
    const demo = this.deps.demo.isDemo(serviceId);
    // Sessions on a demo service are not looked up: like anonymous callers, the per-IP limit holds them.
    if (demo) return { service, visibility: 'all', demo, denial: hiddenFlag, cacheHit, reader: readsWithToken(principal, service) };
    const role = principal.type === 'session' ? await this.roleOf(principal.user.id, service.projectId) : null;
    return decided(principal, service, role, cacheHit);
  }

  /** Synchronous fast path: the grant when it needs no I/O (known service, not a session), else undefined. */
  grantNow(principal: Principal, serviceId: string): ServiceGrant | undefined {
    if (principal.type === 'session' || principal.type === 'personal_access_token') return undefined;
    if (principal.type === 'project_api_token' && principal.scope && principal.scope.serviceId !== serviceId) throw DENIALS.hidden();
    const service = this.deps.snapshots.get(serviceId);
    if (service === undefined) return undefined;
    if (this.deps.demo.isDemo(serviceId)) return { service, visibility: 'all', demo: true, denial: hiddenFlag, cacheHit: true, reader: readsWithToken(principal, service) };
    return decided(principal, service, null, true);
  }

  private async roleOf(userId: string, projectId: string): Promise<ProjectRole | null> {
    const key = `${userId}\u0000${projectId}`;
    const now = Date.now();
    const hit = this.memberships.get(key);
    if (hit !== undefined && hit.until > now) return hit.role;
    const role = await this.deps.roleOf(userId, projectId);
    if (this.memberships.size > 50_000) this.memberships.clear();
    this.memberships.set(key, { role, until: now + MEMBERSHIP_TTL_MS });
    return role;
  }
}

/**
 * The service a request targets: the one it names, or for a bound project token
 * (docs/api-reference.md#project-api-tokens) its own when the request names none. A bound token
 * naming another service is refused like a token of another project (404 Service not found).
 * Unbound callers get `named` back as is, with no allocation.
 */
export function targetService(principal: Principal, named: string | undefined): string | undefined {
  if (principal.type !== 'project_api_token' || !principal.scope) return named;
  if (named !== undefined && named !== '' && named !== principal.scope.serviceId) throw DENIALS.hidden();
  return principal.scope.serviceId;
}

/**
 * The environment a request targets, like targetService: a bound token's own when the request
 * names none, refused (404 Service not found) when it names another. Undefined means the route's
 * default.
 */
export function targetEnvironment(principal: Principal, named: Environment | undefined): Environment | undefined {
  if (principal.type !== 'project_api_token' || !principal.scope) return named;
  if (named !== undefined && named !== principal.scope.environment) throw DENIALS.hidden();
  return principal.scope.environment;
}

/** The grant on a service that is not a demo: everything with flags:read, else public flags only. */
function decided(principal: Principal, service: ServiceSnapshot, role: ProjectRole | null, cacheHit: boolean): ServiceGrant {
  const denial = decide(principal, service.projectId, role, 'flags:read');
  if (denial === null) return { service, visibility: 'all', demo: false, denial: hiddenFlag, cacheHit, reader: true };
  return { service, visibility: 'public', demo: false, denial: DENIALS[denial], cacheHit, reader: false };
}

/** A project token of the service's own project with read (decided without I/O). */
function readsWithToken(principal: Principal, service: ServiceSnapshot): boolean {
  return principal.type === 'project_api_token' && decide(principal, service.projectId, null, 'flags:read') === null;
}

/** Whether a grant lets the caller see this flag key (a missing key counts as hidden unless visibility is all). */
export function canSee(grant: ServiceGrant, isPublic: boolean | undefined): boolean {
  return grant.visibility === 'all' || isPublic === true;
}
