import type { UserRecord } from '../../auth/principal';
import { notFound } from '../../http/errors';
import type { Sql } from '../../infra/postgres';
import type { WatchStore } from './store';
import type { WatchTarget } from './types';

export interface WatchServiceDeps {
  sql: Sql;
  store: WatchStore;
}

/**
 * Flag watching and the notifications it produces
 * (docs/api-reference.md#watching-and-notifications); the routes check flags:read on the project of
 * the flag's service (access rules, watch/routes.ts).
 */
export class WatchService {
  constructor(private readonly deps: WatchServiceDeps) {}

  /** `projectId`: the project of the target's service. */
  async watch(user: UserRecord, projectId: string, target: WatchTarget) {
    const flagId = await this.deps.store.flagId(this.deps.sql, target);
    if (!flagId) throw notFound('Flag');
    const since = await this.deps.store.watch(this.deps.sql, user.id, projectId, target, flagId);
    return { watching: true, ...target, since: since.toISOString() };
  }

  /** Works after the flag is gone too, so a watch on a deleted flag can be dropped. */
  async unwatch(user: UserRecord, target: WatchTarget) {
    await this.deps.store.unwatch(this.deps.sql, user.id, target);
    return { watching: false, ...target };
  }

  async status(user: UserRecord, target: WatchTarget) {
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
