import type { ProjectAccess } from '../../auth/access';
import type { Principal, UserRecord } from '../../auth/principal';
import { notFound } from '../../http/errors';
import type { Sql } from '../../infra/postgres';
import { asNotFound } from '../projects/common';
import type { ServiceStore } from '../services/store';
import type { WatchStore } from './store';
import type { WatchTarget } from './types';

export interface WatchServiceDeps {
  sql: Sql;
  access: ProjectAccess;
  store: WatchStore;
  services: ServiceStore;
}

/** Flag watching and the notifications it produces (spec 4.6); flags:read on the flag's project. */
export class WatchService {
  constructor(private readonly deps: WatchServiceDeps) {}

  private async projectOf(principal: Principal, serviceId: string): Promise<string> {
    const service = await this.deps.services.findById(this.deps.sql, serviceId);
    if (!service) throw notFound('Service');
    await asNotFound('Service', this.deps.access.require(principal, service.projectId, 'flags:read'));
    return service.projectId;
  }

  async watch(principal: Principal, user: UserRecord, target: WatchTarget) {
    const projectId = await this.projectOf(principal, target.serviceId);
    const flagId = await this.deps.store.flagId(this.deps.sql, target);
    if (!flagId) throw notFound('Flag');
    const since = await this.deps.store.watch(this.deps.sql, user.id, projectId, target, flagId);
    return { watching: true, ...target, since: since.toISOString() };
  }

  /** Works after the flag is gone too, so a watch on a deleted flag can be dropped. */
  async unwatch(principal: Principal, user: UserRecord, target: WatchTarget) {
    await this.projectOf(principal, target.serviceId);
    await this.deps.store.unwatch(this.deps.sql, user.id, target);
    return { watching: false, ...target };
  }

  async status(principal: Principal, user: UserRecord, target: WatchTarget) {
    await this.projectOf(principal, target.serviceId);
    return { watching: await this.deps.store.isWatching(this.deps.sql, user.id, target), ...target };
  }

  notifications(user: UserRecord, limit: number) {
    return this.deps.store.notifications(this.deps.sql, user.id, limit);
  }

  async markAllRead(user: UserRecord) {
    const readAt = await this.deps.store.markAllRead(this.deps.sql, user.id);
    return { unreadCount: 0, readAt: readAt.toISOString() };
  }
}
