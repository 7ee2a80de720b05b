import { z } from 'zod';
import { actingUser } from '../../auth/principal';
import { defineRoute, type AnyRoute } from '../../http/route';
import { newId } from '../../infra/ids';
import type { Sql } from '../../infra/postgres';

const OrgSchema = z.object({ id: z.string(), name: z.string(), role: z.enum(['owner', 'admin', 'member']) });

/**
 * Organizations group projects; every user owns a personal one
 * (docs/api-reference.md#organizations).
 */
export function orgRoutes(deps: { sql: Sql }): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/orgs',
      summary: "The caller's organizations with their role",
      tags: ['orgs'],
      auth: 'user',
      response: z.object({ orgs: z.array(OrgSchema) }),
      async handler({ principal }) {
        const user = actingUser(principal)!;
        const orgs = await deps.sql<{ id: string; name: string; role: 'owner' | 'admin' | 'member'; personal: boolean; created_at: Date }[]>`
          SELECT o.id, o.name, m.role, o.personal, o.created_at FROM org_members m JOIN orgs o ON o.id = m.org_id
          WHERE m.user_id = ${user.id} ORDER BY o.created_at`;
        return { orgs: orgs.map((o) => ({ id: o.id, name: o.name, role: o.role, personal: o.personal, createdAt: o.created_at.toISOString() })) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/orgs',
      summary: 'Create an organization owned by the caller',
      tags: ['orgs'],
      auth: 'user',
      adminTier: true,
      status: 201,
      body: z.object({ name: z.string().trim().min(1).max(200) }).strict(),
      response: OrgSchema.extend({ createdAt: z.string() }),
      async handler({ principal, body }) {
        const user = actingUser(principal)!;
        const id = newId('org');
        const [org] = await deps.sql.begin(async (tx) => {
          const rows = await tx<{ id: string; name: string; created_at: Date }[]>`
            INSERT INTO orgs (id, name, created_by) VALUES (${id}, ${body.name}, ${user.id}) RETURNING id, name, created_at`;
          await tx`INSERT INTO org_members (org_id, user_id, role) VALUES (${id}, ${user.id}, 'owner')`;
          return rows;
        });
        return { id: org.id, name: org.name, role: 'owner' as const, personal: false, createdAt: org.created_at.toISOString() };
      },
    }),
  ];
}
