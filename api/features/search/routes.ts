import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import type { FlagSearchStore } from './store';
import { FlagSearchQuerySchema, FlagSearchResultSchema } from './types';

/**
 * The console's global search (docs/api-reference.md#global-flag-search): flags of every project
 * the caller may read flags of. No project named, so the access rule grants every such project
 * (a project token: its own; a personal token: within its scopes).
 */
export function searchRoutes(deps: { sql: Sql; store: FlagSearchStore }): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/search/flags',
      summary: 'Find flags by key or name across every project the caller can read',
      tags: ['search'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: () => undefined },
      query: FlagSearchQuerySchema,
      response: z.object({ results: z.array(FlagSearchResultSchema) }),
      async handler({ query, granted }) {
        const projectIds = granted.map((g) => g.projectId);
        return { results: await deps.store.search(deps.sql, projectIds, query.q, query.limit) };
      },
    }),
  ];
}
