import { z } from 'zod';
import type { Config } from '../../config';
import { defineRoute, type AnyRoute, type RequestContext } from '../../http/route';
import { idSchema } from '../projects/common';

/** Where SDKs reach this deployment (docs/api-reference.md#sdk-endpoints). */
export const SdkEndpointsSchema = z.object({
  dataUrl: z.string().describe('The data plane (PUBLIC_DATA_URL, else this deployment as the caller reached it)'),
  ofrepBaseUrl: z.string().describe('What OFREP providers take as their base URL (they append /ofrep/v1/...)'),
  ingestUrl: z.string().nullable().describe('The ingest listener (POST /e); null when this process does not serve it'),
  flagd: z
    .object({
      host: z.string(),
      evaluationPort: z.number().int().describe('FLAGD_PORT: RPC mode'),
      syncPort: z.number().int().describe('FLAGD_SYNC_PORT: in-process mode'),
      tls: z.boolean(),
    })
    .nullable()
    .describe('null when FLAGD_ENABLED=false'),
});

/** The URLs this process listens on; filled in by startRoles once its listeners are bound. */
export type ListenerUrls = Partial<Record<'control' | 'data' | 'ingest' | 'flagd' | 'flagdSync' | 'management', string>>;

type SdkConfig = Pick<Config, 'PUBLIC_DATA_URL' | 'FLAGD_ENABLED' | 'FLAGD_PORT' | 'FLAGD_SYNC_PORT' | 'FLAGD_TLS_CERT'>;

/**
 * The endpoints shown on the console's "Connect an SDK" page. A listener's host is the one the
 * caller reached us at (HOST may be a wildcard address), with the port the listener is bound to.
 */
export function sdkEndpointRoutes(deps: { config: SdkConfig; listenerUrls: ListenerUrls }): AnyRoute[] {
  const { config, listenerUrls } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/sdk-endpoints',
      summary: "The data plane, OFREP, ingest and flagd addresses an SDK of this project connects to",
      tags: ['evaluation'],
      auth: 'authenticated',
      access: { capability: 'services:read', project: (ctx) => ctx.params.id },
      params: z.object({ id: idSchema }),
      response: SdkEndpointsSchema,
      async handler(ctx) {
        const origin = `${ctx.req.protocol}://${ctx.req.get('host')}`;
        const dataUrl = (config.PUBLIC_DATA_URL ?? sameHost(ctx, listenerUrls.data) ?? origin).replace(/\/+$/, '');
        const flagdHost = config.PUBLIC_DATA_URL ? new URL(config.PUBLIC_DATA_URL).hostname : ctx.req.hostname;
        const evaluationPort = portOf(listenerUrls.flagd) ?? config.FLAGD_PORT;
        const syncPort = portOf(listenerUrls.flagdSync) ?? config.FLAGD_SYNC_PORT;
        return {
          dataUrl,
          ofrepBaseUrl: `${dataUrl}/api`,
          ingestUrl: sameHost(ctx, listenerUrls.ingest) ?? null,
          flagd: config.FLAGD_ENABLED ? { host: flagdHost, evaluationPort, syncPort, tls: Boolean(config.FLAGD_TLS_CERT) } : null,
        };
      },
    }),
  ];
}

function portOf(url: string | undefined): number | undefined {
  return url ? Number(new URL(url).port) : undefined;
}

/** A listener of this process at the host the caller used. */
function sameHost(ctx: RequestContext<unknown, unknown, unknown>, url: string | undefined): string | undefined {
  if (!url) return undefined;
  const reached = new URL(`${ctx.req.protocol}://${ctx.req.get('host')}`);
  reached.port = new URL(url).port;
  return reached.origin;
}
