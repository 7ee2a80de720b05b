import type { ProjectGrant } from '../../auth/access';
import { badRequest, conflict, notFound } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Sql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit } from '../audit/writer';
import { deriveSlug, type Caller } from '../projects/common';
import { ServiceSlugTakenError, type ServiceStore } from './store';
import type { ServiceInput, ServicePatch, ServiceRecord } from './types';

export interface ServiceServiceDeps {
  sql: Sql;
  store: ServiceStore;
}

const slugTaken = (slug: string) => conflict(`A service with slug '${slug}' already exists in this project; choose another name or pass a slug`);

/**
 * Services of a project (docs/api-reference.md#projects-and-services): the routes check
 * services:read/write/delete on the owning project (access rules, services/routes.ts) before any
 * method here runs.
 */
export class ServiceService {
  constructor(private readonly deps: ServiceServiceDeps) {}

  async create(caller: Caller, input: ServiceInput): Promise<ServiceRecord> {
    const { store, sql } = this.deps;
    const slug = input.slug ?? deriveSlug(input.name);
    if (!slug) throw badRequest('Cannot derive a slug from this name; pass a slug', [{ path: 'body.slug', message: 'Required when the name has no letters or digits' }]);
    try {
      return await sql.begin(async (tx) => {
        const service = await store.insert(tx, {
          id: newId('svc'),
          projectId: input.projectId,
          name: input.name,
          slug,
          description: input.description ?? '',
          tags: input.tags ?? [],
        });
        await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
          projectId: service.projectId,
          action: 'service.create',
          resourceType: 'service',
          resourceId: service.id,
          resourceName: service.name,
          after: service,
        });
        return service;
      });
    } catch (error) {
      if (error instanceof ServiceSlugTakenError) throw slugTaken(error.slug);
      throw error;
    }
  }

  /** The services of the granted projects (one named project, or every project the caller can read). */
  async list(grants: ProjectGrant[], q: { search?: string; limit: number; offset: number }) {
    const projectIds = grants.map((g) => g.projectId);
    const page = await this.deps.store.list(this.deps.sql, { projectIds, search: q.search, limit: q.limit, offset: q.offset });
    return { ...page, limit: q.limit, offset: q.offset };
  }

  async get(id: string): Promise<ServiceRecord> {
    const service = await this.deps.store.findById(this.deps.sql, id);
    if (!service) throw notFound('Service');
    return service;
  }

  /** Slugs are unique per project; when the caller's projects share one, `projectId` decides (one grant). */
  async getBySlug(grants: ProjectGrant[], slug: string): Promise<ServiceRecord> {
    const { store, sql } = this.deps;
    const projectIds = grants.map((g) => g.projectId);
    const matches = await store.findBySlug(sql, projectIds, slug);
    if (!matches.length) throw notFound('Service');
    if (matches.length > 1) {
      throw badRequest(`Slug '${slug}' matches services in several of your projects; pass projectId`, [
        { path: 'query.projectId', message: 'Required when the slug is ambiguous' },
      ]);
    }
    return matches[0];
  }

  async update(caller: Caller, id: string, patch: ServicePatch): Promise<ServiceRecord> {
    const { store, sql } = this.deps;
    try {
      return await sql.begin(async (tx) => {
        const before = await store.findById(tx, id, { forUpdate: true });
        if (!before) throw notFound('Service');
        const after = await store.update(tx, id, patch);
        await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
          projectId: after.projectId,
          action: 'service.update',
          resourceType: 'service',
          resourceId: id,
          resourceName: after.name,
          before,
          after,
        });
        return after;
      });
    } catch (error) {
      if (error instanceof ServiceSlugTakenError) throw slugTaken(error.slug);
      throw error;
    }
  }

  /** Deletes the service with all its flags (cascade). */
  async delete(caller: Caller, id: string): Promise<void> {
    const { store, sql } = this.deps;
    await sql.begin(async (tx) => {
      const before = await store.findById(tx, id, { forUpdate: true });
      if (!before) throw notFound('Service');
      await store.delete(tx, id);
      await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
        projectId: before.projectId,
        action: 'service.delete',
        resourceType: 'service',
        resourceId: id,
        resourceName: before.name,
        before,
      });
    });
  }
}
