import { scopesGrant } from '../../auth/permissions';
import type { Principal, ProjectRole } from '../../auth/principal';
import { HttpError, forbidden, notFound, unauthorized } from '../../http/errors';
import type { ServiceSnapshot, SnapshotStore, Visibility } from './snapshots';
import type { EvaluationStore } from './store';

/** Which services are public demo services (spec 4.2): config ids plus the ones seeded at start. */
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

/** The message and `error` text spec 7 fixes for personal tokens on SDK routes. */
export const PERSONAL_TOKEN_REFUSAL = 'Forbidden: personal tokens cannot evaluate flags or call SDK endpoints; use a project API token';

export function personalTokenRefused(): HttpError {
  return new HttpError(403, PERSONAL_TOKEN_REFUSAL, {}, 'FORBIDDEN');
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
const hiddenService = () => notFound('Service');
const needsRead = () => forbidden("You need 'read' permission");
const needsCredential = () => unauthorized();

/**
 * Who may evaluate what (spec 4.1, 5.3): public flags need no credential; every other flag
 * needs a project API token of the service's project with `read`, or a session of a project
 * member. Demo services are open to everyone. Personal access tokens never evaluate (5.5).
 *
 * A caller without read access sees only public flags. Asking for anything else is 401 for
 * an anonymous caller (it may have access with a credential), 403 for a token of the project
 * without `read`, and 404 for a caller with no access to the project (existence is not
 * revealed, as everywhere else). A missing flag counts as "anything else" unless the caller
 * may read the service, so anonymous callers cannot probe for flag keys.
 *
 * Project tokens are decided without I/O. Session memberships are cached for 5 s per
 * (user, project), so a removed member keeps evaluation access at most that long.
 */
export class EvaluationAccess {
  private readonly memberships = new Map<string, { role: ProjectRole | null; until: number }>();

  constructor(
    private readonly deps: { snapshots: SnapshotStore; store: EvaluationStore; demo: DemoServices },
  ) {}

  /** Authorizes `principal` for a service; throws for unknown services and personal tokens. */
  async grant(principal: Principal, serviceId: string): Promise<ServiceGrant> {
    if (principal.type === 'personal_access_token') throw personalTokenRefused();
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
    switch (principal.type) {
      case 'project_api_token': {
        if (principal.projectId !== service.projectId) return { service, visibility: 'public', demo, denial: hiddenService, cacheHit, reader: false };
        if (!scopesGrant(principal.scopes, 'flags:read')) {
          return { service, visibility: 'public', demo, denial: needsRead, cacheHit, reader: false };
        }
        return { service, visibility: 'all', demo, denial: hiddenFlag, cacheHit, reader: true };
      }
      case 'session': {
        const role = await this.roleOf(principal.user.id, service.projectId);
        if (role === null) return { service, visibility: 'public', demo, denial: hiddenService, cacheHit, reader: false };
        return { service, visibility: 'all', demo, denial: hiddenFlag, cacheHit, reader: true };
      }
      default:
        return { service, visibility: 'public', demo, denial: needsCredential, cacheHit, reader: false };
    }
  }

  /** Synchronous fast path: the grant when it needs no I/O (known service, not a session), else undefined. */
  grantNow(principal: Principal, serviceId: string): ServiceGrant | undefined {
    if (principal.type === 'session' || principal.type === 'personal_access_token') return undefined;
    const service = this.deps.snapshots.get(serviceId);
    if (service === undefined) return undefined;
    if (this.deps.demo.isDemo(serviceId)) return { service, visibility: 'all', demo: true, denial: hiddenFlag, cacheHit: true, reader: readsWithToken(principal, service) };
    if (principal.type === 'anonymous') return { service, visibility: 'public', demo: false, denial: needsCredential, cacheHit: true, reader: false };
    if (principal.projectId !== service.projectId) return { service, visibility: 'public', demo: false, denial: hiddenService, cacheHit: true, reader: false };
    if (!scopesGrant(principal.scopes, 'flags:read')) {
      return { service, visibility: 'public', demo: false, denial: needsRead, cacheHit: true, reader: false };
    }
    return { service, visibility: 'all', demo: false, denial: hiddenFlag, cacheHit: true, reader: true };
  }

  private async roleOf(userId: string, projectId: string): Promise<ProjectRole | null> {
    const key = `${userId}\u0000${projectId}`;
    const now = Date.now();
    const hit = this.memberships.get(key);
    if (hit !== undefined && hit.until > now) return hit.role;
    const role = await this.deps.store.roleOf(userId, projectId);
    if (this.memberships.size > 50_000) this.memberships.clear();
    this.memberships.set(key, { role, until: now + MEMBERSHIP_TTL_MS });
    return role;
  }
}

/** A project token of the service's own project with read (decided without I/O). */
function readsWithToken(principal: Principal, service: ServiceSnapshot): boolean {
  return principal.type === 'project_api_token' && principal.projectId === service.projectId && scopesGrant(principal.scopes, 'flags:read');
}

/** Whether a grant lets the caller see this flag key (a missing key counts as hidden unless visibility is all). */
export function canSee(grant: ServiceGrant, isPublic: boolean | undefined): boolean {
  return grant.visibility === 'all' || isPublic === true;
}
