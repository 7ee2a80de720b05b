import { z } from 'zod';
import { EnvironmentSchema, type Environment } from '../../domain/environments';
import { badRequest, HttpError, notFound, validationFailed, type FieldProblem } from '../../http/errors';
import type { Logger } from '../../infra/logger';
import type { Queryable, Sql } from '../../infra/postgres';
import type { AuditActor } from '../audit/writer';
import { FieldProblemsSchema, FLAG_CONTENT_FIELDS, FlagCreateSchema, FlagRecordSchema } from './schema';
import type { FlagService } from './service';
import type { FlagListFilter, ListPosition } from './store';
import type { FlagCreateInput, FlagPatch, FlagRecord } from './types';
import { canonicalJson } from './validation';

/**
 * The version every exported file carries, and the only one import reads
 * (docs/api-reference.md#versioning).
 */
export const EXPORT_FORMAT_VERSION = '1.0';
export const IMPORT_MAX_FLAGS = 10_000;
const EXPORT_PAGE = 1000;

/** The downloadable file: version, exportedAt, projectId, flagCount, flags; plus the services, for imports elsewhere. */
export const ExportFileSchema = z.object({
  version: z.literal(EXPORT_FORMAT_VERSION),
  exportedAt: z.string(),
  projectId: z.string(),
  serviceId: z.string().nullable(),
  environment: EnvironmentSchema.nullable(),
  includeDisabled: z.boolean(),
  flagCount: z.number().int(),
  services: z.array(z.object({ id: z.string(), name: z.string(), slug: z.string() })),
  flags: z.array(FlagRecordSchema),
});
export type FlagExportFile = z.infer<typeof ExportFileSchema>;
export type ExportedService = FlagExportFile['services'][number];

export const ImportFileSchema = z
  .object({
    version: z.string().refine((v) => v === EXPORT_FORMAT_VERSION, { message: `unsupported export version; this server reads version "${EXPORT_FORMAT_VERSION}"` }),
    exportedAt: z.string().optional(),
    projectId: z.string().min(1).max(200).optional().describe('The exporting project; the default target'),
    serviceId: z.string().nullable().optional(),
    environment: EnvironmentSchema.nullable().optional(),
    includeDisabled: z.boolean().optional(),
    flagCount: z.number().int().min(0).optional(),
    services: z.array(z.object({ id: z.string(), name: z.string().optional(), slug: z.string() }).passthrough()).max(10_000).optional(),
    flags: z.array(z.unknown()).max(IMPORT_MAX_FLAGS),
  })
  .strict()
  .superRefine((file, ctx) => {
    if (file.flagCount !== undefined && file.flagCount !== file.flags.length) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['flagCount'], message: `says ${file.flagCount} flags but the file holds ${file.flags.length}: truncated or edited` });
    }
  });
export type ImportFile = z.infer<typeof ImportFileSchema>;

export interface ImportTarget {
  /** Put every flag into this service instead of the one it names. */
  serviceId?: string;
  /** false: flags that exist are left as they are (skipped). Default true. */
  overwrite: boolean;
}

const ImportItemResultSchema = z.object({
  index: z.number().int(),
  key: z.string().nullable(),
  serviceId: z.string().nullable(),
  environment: z.string().nullable(),
  status: z.enum(['created', 'updated', 'skipped', 'failed']),
  /** The flag's version after the import (created, updated, skipped). */
  version: z.number().int().optional(),
  error: z.string().optional(),
  statusCode: z.number().int().optional(),
  details: FieldProblemsSchema.optional(),
});
export type ImportItemResult = z.infer<typeof ImportItemResultSchema>;
export type ImportStatus = ImportItemResult['status'];

export const ImportReportSchema = z.object({
  success: z.boolean(),
  projectId: z.string(),
  total: z.number().int(),
  created: z.number().int(),
  updated: z.number().int(),
  skipped: z.number().int(),
  failed: z.number().int(),
  results: z.array(ImportItemResultSchema),
});
export type ImportReport = z.infer<typeof ImportReportSchema>;

export interface FlagTransferDeps {
  sql: Sql;
  flags: FlagService;
  logger: Logger;
}

/** Read-only fields of an exported flag: describe where it came from, never written by an import. */
const RECORD_ONLY_FIELDS = ['id', 'projectId', 'version', 'createdAt', 'updatedAt'] as const;

/**
 * Export and import of a project's flags (docs/api-reference.md#flags,
 * docs/api-reference.md#versioning). Import is an idempotent upsert per (service, environment,
 * key): a missing flag is created, a differing one updated through FlagService (each its own
 * transaction with snapshot, audit and event), an identical one skipped without writing anything,
 * so importing the same file again changes nothing. The routes check flags:read (export) and
 * flags:write (import) on the project first.
 */
/** The project an import writes to: ?projectId, else the file's own. */
export function importTarget(query: { projectId?: string }, file: ImportFile): string {
  const projectId = query.projectId ?? file.projectId;
  if (!projectId) {
    throw badRequest('Validation failed: query.projectId: name the target project (the file has no projectId)', [
      { path: 'query.projectId', message: 'Required' },
    ]);
  }
  return projectId;
}

export class FlagTransfer {
  constructor(private readonly deps: FlagTransferDeps) {}

  /** `reader`: where to read (the route's replica reader, docs/operations.md#read-replica); the primary by default. */
  async export(q: { projectId: string; serviceId?: string; environment?: Environment; includeDisabled: boolean }, reader: Queryable = this.deps.sql): Promise<FlagExportFile> {
    if (q.serviceId) {
      const service = await this.deps.flags.findService(q.serviceId);
      if (!service || service.projectId !== q.projectId) throw notFound('Service');
    }
    const flags = await this.allFlags(
      {
        projectId: q.projectId,
        serviceId: q.serviceId,
        environment: q.environment,
        enabled: q.includeDisabled ? undefined : true,
      },
      reader,
    );
    const used = new Set(flags.map((f) => f.serviceId));
    const services = (await this.servicesOf(q.projectId, reader)).filter((s) => used.has(s.id));
    return {
      version: EXPORT_FORMAT_VERSION,
      exportedAt: new Date().toISOString(),
      projectId: q.projectId,
      serviceId: q.serviceId ?? null,
      environment: q.environment ?? null,
      includeDisabled: q.includeDisabled,
      flagCount: flags.length,
      services,
      flags,
    };
  }

  /** `projectId`: the target project (importTarget), where the route's rule granted flags:write. */
  async import(actor: AuditActor, projectId: string, file: ImportFile, target: ImportTarget): Promise<ImportReport> {
    if (target.serviceId) {
      const service = await this.deps.flags.findService(target.serviceId);
      if (!service || service.projectId !== projectId) throw notFound('Service');
    }

    const projectServices = await this.servicesOf(projectId);
    const serviceIds = new Set(projectServices.map((s) => s.id));
    const serviceBySlug = new Map(projectServices.map((s) => [s.slug, s.id]));
    const fileSlugs = new Map((file.services ?? []).map((s) => [s.id, s.slug]));
    const resolveService = (named: string): string | undefined => {
      if (target.serviceId) return target.serviceId;
      if (serviceIds.has(named)) return named;
      const slug = fileSlugs.get(named);
      return slug === undefined ? undefined : serviceBySlug.get(slug);
    };

    const existing = new Map<string, FlagRecord>();
    for (const flag of await this.allFlags({ projectId })) existing.set(refKey(flag.serviceId, flag.environment, flag.key), flag);

    const results: ImportItemResult[] = [];
    for (let index = 0; index < file.flags.length; index++) {
      results.push(await this.importOne(actor, index, file.flags[index], { projectId, resolveService, existing, overwrite: target.overwrite }));
    }
    const count = (status: ImportStatus) => results.filter((r) => r.status === status).length;
    const failed = count('failed');
    return {
      success: failed === 0,
      projectId,
      total: results.length,
      created: count('created'),
      updated: count('updated'),
      skipped: count('skipped'),
      failed,
      results,
    };
  }

  private async importOne(
    actor: AuditActor,
    index: number,
    raw: unknown,
    ctx: { projectId: string; resolveService: (id: string) => string | undefined; existing: Map<string, FlagRecord>; overwrite: boolean },
  ): Promise<ImportItemResult> {
    const fields = raw && typeof raw === 'object' && !Array.isArray(raw) ? { ...(raw as Record<string, unknown>) } : null;
    const key = typeof fields?.key === 'string' ? fields.key : null;
    const namedService = typeof fields?.serviceId === 'string' ? fields.serviceId : null;
    const environment = typeof fields?.environment === 'string' ? fields.environment : null;
    const base = { index, key, serviceId: namedService, environment };
    const fail = (error: HttpError): ImportItemResult => {
      const details = error.extra.details as FieldProblem[] | undefined;
      return { ...base, status: 'failed', error: error.message, statusCode: error.status, ...(details ? { details } : {}) };
    };

    if (!fields) return fail(badRequest('Validation failed: a flag must be an object'));
    if (namedService === null) return fail(validationFailed([{ path: 'serviceId', message: 'Required' }]));
    if (environment === null) {
      return fail(badRequest('Validation failed: environment: Required (exported flags name their environment)', [{ path: 'environment', message: 'Required' }]));
    }
    const serviceId = ctx.resolveService(namedService);
    if (!serviceId) return fail(notFound(`Service "${namedService}" in the target project (export its service list with the file, or pass serviceId)`));
    base.serviceId = serviceId;

    for (const field of RECORD_ONLY_FIELDS) delete fields[field];
    const parsed = FlagCreateSchema.safeParse({ ...fields, serviceId });
    if (!parsed.success) {
      const details = parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
      return fail(validationFailed(details));
    }
    const input = parsed.data;
    const env = input.environment!;
    const slot = refKey(serviceId, env, input.key);
    const current = ctx.existing.get(slot);

    try {
      if (!current) {
        const created = await this.deps.flags.create(actor, { ...input, environment: env }, { metadata: { via: 'import' } });
        const flag = created[0];
        ctx.existing.set(slot, flag);
        return { ...base, status: 'created', version: flag.version };
      }
      if (!ctx.overwrite) return { ...base, status: 'skipped', version: current.version };
      const patch = contentPatch(input, current);
      if (sameContent(patch, current)) return { ...base, status: 'skipped', version: current.version };
      const updated = await this.deps.flags.update(actor, { key: input.key, serviceId, environment: env }, patch, undefined, { metadata: { via: 'import' } });
      ctx.existing.set(slot, updated);
      return { ...base, status: updated.version === current.version ? 'skipped' : 'updated', version: updated.version };
    } catch (error) {
      if (error instanceof HttpError) return fail(error);
      this.deps.logger.error({ err: error }, 'importing a flag failed');
      return fail(new HttpError(500, 'Internal server error'));
    }
  }

  private async allFlags(filter: FlagListFilter, reader: Queryable = this.deps.sql): Promise<FlagRecord[]> {
    const out: FlagRecord[] = [];
    let after: ListPosition | undefined;
    for (;;) {
      const page = await this.deps.flags.list(filter, { limit: EXPORT_PAGE, offset: 0, after }, reader);
      out.push(...page.flags);
      const last = page.flags.at(-1);
      if (!page.hasAfter || !last) return out;
      after = { key: last.key, id: last.id };
    }
  }

  private async servicesOf(projectId: string, reader: Queryable = this.deps.sql): Promise<ExportedService[]> {
    return reader<ExportedService[]>`SELECT id, name, slug FROM services WHERE project_id = ${projectId} ORDER BY slug`;
  }
}

function refKey(serviceId: string, environment: string, key: string): string {
  return `${serviceId}\u0000${environment}\u0000${key}`;
}

/**
 * The content fields the file gives. A targeting rule written without an id takes the id of the
 * rule at the same position, so a re-import does not mint new ids (and a new version) each time.
 */
function contentPatch(input: FlagCreateInput, current: FlagRecord): FlagPatch {
  const patch: Record<string, unknown> = {};
  for (const field of FLAG_CONTENT_FIELDS) if (input[field] !== undefined) patch[field] = input[field];
  if (input.targeting) {
    patch.targeting = input.targeting.map((rule, i) => (rule.id === undefined && current.targeting[i] ? { ...rule, id: current.targeting[i].id } : rule));
  }
  if (input.tags) patch.tags = [...new Set(input.tags)];
  return patch as FlagPatch;
}

function sameContent(patch: FlagPatch, current: FlagRecord): boolean {
  return Object.entries(patch).every(([field, value]) => canonicalJson(value) === canonicalJson(current[field as keyof FlagRecord]));
}
