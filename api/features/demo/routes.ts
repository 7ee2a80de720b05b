import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../http/route';
import { EnvironmentSchema } from '../../domain/environments';
import type { DemoServiceRegistry } from './registry';

/**
 * GET /api/demo lists the public demo services, without authentication
 * (docs/api-reference.md#demo-service).
 */
export function demoRoutes(deps: { registry: DemoServiceRegistry }): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/demo',
      summary: 'Public demo services and their environments (no authentication)',
      tags: ['demo'],
      auth: 'public',
      response: z.object({
        services: z.array(
          z.object({
            serviceId: z.string(),
            environments: z.array(EnvironmentSchema).describe('Environments the service has flags in'),
          }),
        ),
      }),
      async handler() {
        return { services: await deps.registry.describe() };
      },
    }),
  ];
}
