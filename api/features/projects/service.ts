import type { ProjectAccess, ProjectGrant } from '../../auth/access';
import { actingUser, type Principal } from '../../auth/principal';
import { badRequest, conflict, forbidden, notFound, validationFailed } from '../../http/errors';
import type { PrometheusGuards } from '../../lib/release-safety/prometheus-guards';
import { newId } from '../../infra/ids';
import type { Sql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit } from '../audit/writer';
import type { InvitationExpiryTimers } from '../invitations/expiry';
import type { InvitationStore } from '../invitations/store';
import { deriveSlug, type Caller } from './common';
import { ProjectSlugTakenError, type ProjectStore } from './store';
import type { ProjectInput, ProjectPatch, ProjectRecord, ProjectWithRole } from './types';

export interface ProjectServiceDeps {
  sql: Sql;
  access: ProjectAccess;
  store: ProjectStore;
  invitations: InvitationStore;
  invitationTimers: InvitationExpiryTimers;
  /** Refuses guardrail guards whose servers are not on the allow-list. */
  guards: PrometheusGuards;
}

const slugTaken = (slug: string) => conflict(`A project with slug '${slug}' already exists in this organization`);

export class ProjectService {
  constructor(private readonly deps: ProjectServiceDeps) {}

  /** The caller's personal organization, where projects go by default; null for callers that are no user. */
  async personalOrgOf(principal: Principal): Promise<string | null> {
    const user = actingUser(principal);
    return user ? this.deps.store.personalOrgOf(this.deps.sql, user.id) : null;
  }

  /**
   * The creator becomes the project's owner (docs/api-reference.md#projects-and-services); the
   * route checked org:manage in the organization.
   */
  async create(caller: Caller, input: ProjectInput): Promise<ProjectWithRole> {
    const user = actingUser(caller.principal);
    if (!user) throw forbidden('creating a project needs a signed-in user or a personal access token');
    const { store, sql } = this.deps;
    const orgId = input.orgId ?? (await this.personalOrgOf(caller.principal));
    if (!orgId) throw notFound('Organization');
    const slug = input.slug ?? deriveSlug(input.name);
    if (!slug) throw badRequest('Cannot derive a slug from this name; pass a slug', [{ path: 'body.slug', message: 'Required when the name has no letters or digits' }]);

    try {
      const project = await sql.begin(async (tx) => {
        const created = await store.insert(tx, {
          id: newId('prj'),
          orgId,
          name: input.name,
          slug,
          description: input.description ?? '',
          tags: input.tags ?? [],
          createdBy: user.id,
        });
        await store.addOwner(tx, created.id, user.id);
        await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
          projectId: created.id,
          action: 'project.create',
          resourceType: 'project',
          resourceId: created.id,
          resourceName: created.name,
          after: created,
        });
        return created;
      });
      return { ...project, role: 'owner' };
    } catch (error) {
      if (error instanceof ProjectSlugTakenError) throw slugTaken(error.slug);
      throw error;
    }
  }

  /** The projects the caller can read (the route's grants), each with the caller's role. */
  async list(grants: ProjectGrant[]): Promise<ProjectWithRole[]> {
    const roles = new Map(grants.map((g) => [g.projectId, g.role]));
    const projects = await this.deps.store.findByIds(this.deps.sql, [...roles.keys()]);
    return projects.map((p) => ({ ...p, role: roles.get(p.id) ?? null }));
  }

  async get(grant: ProjectGrant): Promise<ProjectWithRole> {
    const project = await this.deps.store.findById(this.deps.sql, grant.projectId);
    if (!project) throw notFound('Project');
    return { ...project, role: grant.role };
  }

  /** Slugs are unique per organization; a user in several organizations may need `orgId`. */
  async getBySlug(grants: ProjectGrant[], slug: string, orgId?: string): Promise<ProjectWithRole> {
    const visible = await this.list(grants);
    const matches = visible.filter((p) => p.slug === slug && (!orgId || p.orgId === orgId));
    if (!matches.length) throw notFound('Project');
    if (matches.length > 1) {
      throw badRequest(`Slug '${slug}' matches projects in several organizations; pass orgId`, [
        { path: 'query.orgId', message: 'Required when the slug is ambiguous' },
      ]);
    }
    return matches[0];
  }

  /** `grant`: settings:manage on the project (the route's rule); changing the slug is reserved to owners. */
  async update(caller: Caller, grant: ProjectGrant, patch: ProjectPatch): Promise<ProjectWithRole> {
    const { access, store, sql } = this.deps;
    const id = grant.projectId;
    const current = await store.findById(sql, id);
    if (!current) throw notFound('Project');
    if (patch.slug !== undefined && patch.slug !== current.slug) await access.require(caller.principal, id, 'settings:slug');
    const guardProblems = this.deps.guards.problems(patch.guardrailGuards ?? [], 'body.guardrailGuards');
    if (guardProblems.length) throw validationFailed(guardProblems);
    try {
      const updated = await sql.begin(async (tx) => {
        const before = await store.findById(tx, id, { forUpdate: true });
        if (!before) throw notFound('Project');
        const after = await store.update(tx, id, patch);
        await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
          projectId: id,
          action: 'project.update',
          resourceType: 'project',
          resourceId: id,
          resourceName: after.name,
          before,
          after,
        });
        return after;
      });
      return { ...updated, role: grant.role };
    } catch (error) {
      if (error instanceof ProjectSlugTakenError) throw slugTaken(error.slug);
      throw error;
    }
  }

  /**
   * Deletes the project and, by cascade, everything in it. The audit trail is kept: a
   * `project.delete` entry is written and `deleted_projects` remembers the organization, whose
   * owners and admins can still read the trail.
   */
  async delete(caller: Caller, id: string): Promise<void> {
    const { store, sql, invitations } = this.deps;
    const actor = actorFromPrincipal(caller.principal, caller);
    const pending = await sql.begin(async (tx) => {
      const project: ProjectRecord | null = await store.findById(tx, id, { forUpdate: true });
      if (!project) throw notFound('Project');
      const pendingIds = await invitations.pendingIds(tx, id);
      await store.recordDeletion(tx, project, actor.userId);
      await writeAudit(tx, actor, {
        projectId: id,
        action: 'project.delete',
        resourceType: 'project',
        resourceId: id,
        resourceName: project.name,
        before: project,
        metadata: { orgId: project.orgId, slug: project.slug },
      });
      await store.delete(tx, id);
      return pendingIds;
    });
    await this.deps.invitationTimers.settle(pending);
  }
}
