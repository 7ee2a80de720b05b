import { STATUS_CODES } from 'node:http';
import { z } from 'zod';
import { EnvironmentSchema } from '../../domain/environments';
import { BODY_LIMITS, defineRoute, reply, type AnyRoute } from '../../http/route';
import { actorFromPrincipal } from '../audit/writer';
import { EXPORT_FORMAT_VERSION, ExportFileSchema, IMPORT_MAX_FLAGS, ImportFileSchema, ImportReportSchema, importTarget, type FlagTransfer, type ImportReport } from './export-import';

const booleanQuery = (fallback: boolean) =>
  z
    .enum(['true', 'false'])
    .optional()
    .transform((v) => (v === undefined ? fallback : v === 'true'));

const ExportQuery = z.object({
  projectId: z.string().min(1).max(200),
  serviceId: z.string().min(1).max(200).optional().describe('Only this service'),
  environment: EnvironmentSchema.optional().describe('Only this environment'),
  format: z.enum(['json']).default('json'),
  includeDisabled: booleanQuery(true).describe('Default true; false exports only enabled flags'),
});

const ImportQuery = z.object({
  projectId: z.string().min(1).max(200).optional().describe("Target project; default: the file's projectId"),
  serviceId: z.string().min(1).max(200).optional().describe('Put every flag into this service of the target project'),
  overwrite: booleanQuery(true).describe('Default true; false leaves existing flags as they are (reported skipped)'),
});

/** When every flag failed, the report carries the error envelope too. */
const ImportResponseSchema = ImportReportSchema.extend({ error: z.string().optional(), message: z.string().optional() });

/** GET /api/flags/export and POST /api/flags/import (docs/api-reference.md#flags). */
export function flagTransferRoutes(deps: { transfer: FlagTransfer }): AnyRoute[] {
  const { transfer } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/flags/export',
      summary: `Download a project's flags as a version "${EXPORT_FORMAT_VERSION}" JSON file (needs flags read)`,
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:read', project: (ctx) => ctx.query.projectId },
      query: ExportQuery,
      reads: 'replica',
      response: ExportFileSchema,
      async handler({ query, reader }) {
        const file = await transfer.export(query, reader);
        const day = file.exportedAt.slice(0, 10);
        const name = `flags-${query.projectId}${query.serviceId ? `-${query.serviceId}` : ''}${query.environment ? `-${query.environment}` : ''}-${day}.json`;
        return reply(200, file, {
          'Content-Disposition': `attachment; filename="${name.replace(/[^A-Za-z0-9._-]/g, '_')}"`,
          'Cache-Control': 'no-store',
        });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/flags/import',
      summary:
        `Import an exported file (the body is the file as downloaded, version "${EXPORT_FORMAT_VERSION}" only, at most ${IMPORT_MAX_FLAGS} flags). ` +
        "The target is ?projectId (default: the file's project); each flag goes to the service it names, or the service of the target project " +
        'with the same slug, or ?serviceId. Missing flags are created, differing ones updated, identical ones skipped (re-importing changes ' +
        'nothing). Needs flags write. 200 when no flag failed, 207 when some did, and when all failed the status they share or 400.',
      tags: ['flags'],
      auth: 'authenticated',
      access: { capability: 'flags:write', project: (ctx) => importTarget(ctx.query, ctx.body) },
      bodyLimit: BODY_LIMITS.bulk,
      query: ImportQuery,
      body: ImportFileSchema,
      response: ImportResponseSchema,
      async handler(ctx) {
        const { principal, query, body } = ctx;
        const actor = actorFromPrincipal(principal, { ip: ctx.ip, userAgent: ctx.userAgent });
        const report = await transfer.import(actor, ctx.granted[0].projectId, body, query);
        const status = importStatus(report);
        const extra = report.total > 0 && report.failed === report.total ? { error: STATUS_CODES[status] ?? 'Error', message: `All ${report.failed} flags failed` } : {};
        return reply(status, { ...report, ...extra });
      },
    }),
  ];
}

function importStatus(report: ImportReport): number {
  if (report.failed === 0) return 200;
  if (report.failed < report.total) return 207;
  const statuses = new Set(report.results.map((r) => r.statusCode ?? 400));
  return statuses.size === 1 ? [...statuses][0] : 400;
}
