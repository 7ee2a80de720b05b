import { z } from 'zod';
import type { ProjectAccess, ProjectGrant } from '../../auth/access';
import { orgRoleGrants } from '../../auth/permissions';
import { actingUser, type Principal } from '../../auth/principal';
import { badRequest, HttpError, notFound } from '../../http/errors';
import { defineRoute, type AnyRoute } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import { idSchema, limitSchema, offsetSchema, text } from '../projects/common';
import type { ProjectStore } from '../projects/store';
import { ActorDisplaySchema, resolveActors } from './actors';
import type { AuditStore } from './store';

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 24 * 3600_000;

/** ISO date or date-time; a date-time without a zone is UTC. */
const isoDate = z
  .string()
  .regex(ISO_DATE, 'must be an ISO date (2024-05-01) or date-time (2024-05-01T12:00:00Z)')
  .transform((value, ctx) => {
    const withZone = DATE_ONLY.test(value) || /(Z|[+-]\d{2}:?\d{2})$/.test(value) ? value : `${value}Z`;
    const date = new Date(withZone);
    if (Number.isNaN(date.getTime())) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'is not a valid date' });
      return z.NEVER;
    }
    return { date, dateOnly: DATE_ONLY.test(value) };
  });

const AuditLogSchema = z.object({
  id: z.string(),
  projectId: z.string(),
  userId: z.string().nullable(),
  actor: z.string().describe('Who acted, as recorded: a user e-mail, token:<id>, canary:<id>, public-demo, trigger:<name>, system:<reason>'),
  actorDisplay: ActorDisplaySchema,
  action: z.string(),
  resourceType: z.string(),
  resourceId: z.string(),
  resourceName: z.string().nullable(),
  before: z.record(z.unknown()).nullable(),
  after: z.record(z.unknown()).nullable(),
  changes: z.array(z.object({ field: z.string(), oldValue: z.unknown(), newValue: z.unknown() })),
  metadata: z.record(z.unknown()),
  timestamp: z.string(),
  ipAddress: z.string().nullable(),
  userAgent: z.string().nullable(),
});

export interface AuditRouteDeps {
  sql: Sql;
  access: ProjectAccess;
  audit: AuditStore;
  projects: ProjectStore;
}

/**
 * Who may read a project's audit trail: its members (members:view, which every role has; a
 * project token needs manage_members). After the project is deleted, the owners and admins of
 * its organization.
 */
async function auditAccess(deps: AuditRouteDeps, principal: Principal, projectId: string): Promise<ProjectGrant[]> {
  try {
    return [await deps.access.require(principal, projectId, 'members:view')];
  } catch (error) {
    if (!(error instanceof HttpError && error.status === 404)) throw error;
  }
  const user = actingUser(principal);
  const deleted = await deps.projects.findDeleted(deps.sql, projectId);
  const orgRole = user && deleted ? await deps.projects.orgRoleOf(deps.sql, user.id, deleted.orgId) : null;
  if (!deleted || !orgRole || !orgRoleGrants(orgRole, 'org:manage')) throw notFound('Project');
  return [{ projectId, orgId: deleted.orgId, role: null }];
}

/** The most actors the facets list, most recent first (docs/api-reference.md#audit-log). */
const FACET_ACTORS = 200;

/** GET /api/audit and its filter choices (docs/api-reference.md#audit-log). */
export function auditRoutes(deps: AuditRouteDeps): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/audit',
      summary: "A project's audit trail, newest first, filtered and paged (limit max 100, default 50)",
      tags: ['audit'],
      auth: 'authenticated',
      access: { capability: 'members:view', check: (principal, ctx) => auditAccess(deps, principal, ctx.query.projectId) },
      query: z.object({
        projectId: idSchema,
        action: text(100).optional(),
        resourceType: text(100).optional(),
        resourceId: text(200).optional(),
        userId: text(200).optional(),
        actor: text(300).optional(),
        startDate: isoDate.optional(),
        endDate: isoDate.optional(),
        limit: limitSchema,
        offset: offsetSchema,
      }),
      reads: 'replica',
      response: z.object({ logs: z.array(AuditLogSchema), total: z.number().int(), limit: z.number().int(), offset: z.number().int() }),
      async handler({ query, reader }) {
        const startDate = query.startDate?.date;
        const endBefore = query.endDate && new Date(query.endDate.date.getTime() + (query.endDate.dateOnly ? DAY_MS : 1));
        if (startDate && endBefore && startDate >= endBefore) {
          throw badRequest('startDate must not be after endDate', [{ path: 'query.startDate', message: 'must not be after endDate' }]);
        }
        const page = await deps.audit.query(reader ?? deps.sql, {
          projectId: query.projectId,
          action: query.action,
          resourceType: query.resourceType,
          resourceId: query.resourceId,
          userId: query.userId,
          actor: query.actor,
          startDate,
          endBefore,
          limit: query.limit,
          offset: query.offset,
        });
        const named = await resolveActors(reader ?? deps.sql, page.logs);
        const logs = page.logs.map((entry) => ({ ...entry, actorDisplay: named(entry.actor, entry.userId) }));
        return { logs, total: page.total, limit: query.limit, offset: query.offset };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/audit/facets',
      summary: `The actions, resource types and actors (named, at most ${FACET_ACTORS}, most recent first) present in a project's audit trail: the choices of its filters`,
      tags: ['audit'],
      auth: 'authenticated',
      access: { capability: 'members:view', check: (principal, ctx) => auditAccess(deps, principal, ctx.query.projectId) },
      query: z.object({ projectId: idSchema }),
      reads: 'replica',
      response: z.object({
        actions: z.array(z.string()),
        resourceTypes: z.array(z.string()),
        actors: z.array(z.object({ actor: z.string().describe('The value of the `actor` filter'), userId: z.string().nullable(), actorDisplay: ActorDisplaySchema })),
      }),
      async handler({ query, reader = deps.sql }) {
        const facets = await deps.audit.facets(reader, query.projectId, FACET_ACTORS);
        const named = await resolveActors(reader, facets.actors);
        return { ...facets, actors: facets.actors.map((a) => ({ ...a, actorDisplay: named(a.actor, a.userId) })) };
      },
    }),
  ];
}
