import type { ProjectAccess } from '../../auth/access';
import type { Principal } from '../../auth/principal';
import { badRequest, conflict, notFound } from '../../http/errors';
import { newId } from '../../infra/ids';
import type { Sql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit } from '../audit/writer';
import { asNotFound, deriveSlug, type Caller } from '../projects/common';
import { ServiceSlugTakenError, type ServiceStore } from './store';
import type { ServiceInput, ServicePatch, ServiceRecord } from './types';

export interface ServiceServiceDeps {
  sql: Sql;
  access: ProjectAccess;
  store: ServiceStore;
}

const slugTaken = (slug: string) => conflict(`A service with slug '${slug}' already exists in this project; choose another name or pass a slug`);

/** Services of a project (spec 2.3, CONTRACT 7): services:read/write/delete on the owning project. */
export class ServiceService {
  constructor(private readonly deps: ServiceServiceDeps) {}

  async create(caller: Caller, input: ServiceInput): Promise<ServiceRecord> {
    const { access, store, sql } = this.deps;
    await access.require(caller.principal, input.projectId, 'services:write');
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

  /** One project's services, or those of every project the caller can read. */
  async list(principal: Principal, q: { projectId?: string; search?: string; limit: number; offset: number }) {
    const projectIds = q.projectId
      ? [(await this.deps.access.require(principal, q.projectId, 'services:read')).projectId]
      : (await this.deps.access.listAccessible(principal, 'services:read')).map((g) => g.projectId);
    const page = await this.deps.store.list(this.deps.sql, { projectIds, search: q.search, limit: q.limit, offset: q.offset });
    return { ...page, limit: q.limit, offset: q.offset };
  }

  async get(principal: Principal, id: string): Promise<ServiceRecord> {
    const service = await this.deps.store.findById(this.deps.sql, id);
    if (!service) throw notFound('Service');
    await asNotFound('Service', this.deps.access.require(principal, service.projectId, 'services:read'));
    return service;
  }

  /** Slugs are unique per project; when the caller's projects share one, `projectId` decides. */
  async getBySlug(principal: Principal, slug: string, projectId?: string): Promise<ServiceRecord> {
    const { access, store, sql } = this.deps;
    const projectIds = projectId
      ? [(await asNotFound('Service', access.require(principal, projectId, 'services:read'))).projectId]
      : (await access.listAccessible(principal, 'services:read')).map((g) => g.projectId);
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
    const { access, store, sql } = this.deps;
    const found = await store.findById(sql, id);
    if (!found) throw notFound('Service');
    await asNotFound('Service', access.require(caller.principal, found.projectId, 'services:write'));
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
    const { access, store, sql } = this.deps;
    const found = await store.findById(sql, id);
    if (!found) throw notFound('Service');
    await asNotFound('Service', access.require(caller.principal, found.projectId, 'services:delete'));
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
