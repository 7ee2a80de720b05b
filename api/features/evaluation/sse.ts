import { z } from 'zod';
import type { Principal } from '../../auth/principal';
import { clientIp, ipBucket } from '../../http/client-ip';
import { HttpError, serviceUnavailable, validationFailed } from '../../http/errors';
import { EnvironmentSchema } from '../../domain/environments';
import { targetEnvironment, targetService, type ServiceGrant } from './access';
import { defineLeanRoute, type Exchange, type LeanRoute } from './lean';
import { validateQuery } from './schemas';
import type { EvaluationService } from './service';
import { STREAM_RETRY_AFTER_SECONDS, type StreamLimits } from './stream-limits';
import type { DisconnectReason, StreamKind } from '../../lib/metrics/metrics';
import { openSse, type StreamClientLimits, type StreamHub } from './streams';

/**
 * Server-Sent Events of flag changes (docs/api-reference.md#change-events-and-streams): GET
 * /api/flags/stream and /api/connect/stream, on the lean edge so an open stream holds no Express or
 * per-request logger state (see bench:streams). The query is validated like a route's; then the
 * caller's grant, the open-stream caps, and the stream itself (streams.ts).
 */
export interface SseDeps {
  evaluation: EvaluationService;
  hub: StreamHub;
  /** Open-stream caps (per IP, credential, service), shared with the Connect EventStream. */
  streamLimits: StreamLimits;
  /** What one SSE client may cost before it is dropped (buffered output, stall time). */
  streamClient: StreamClientLimits;
  trustProxy: number;
}

export const StreamQuery = z.object({
  serviceId: z.string().min(1).max(128).optional().describe("Required, except with a bound project API token, whose own service it defaults to"),
  environment: EnvironmentSchema.optional().describe("Every environment when absent (a bound project API token: the token's own)"),
  clientId: z.string().max(128).optional(),
  lastEventId: z.string().max(256).optional().describe('Alternative to the Last-Event-ID header'),
});
type StreamQuery = z.infer<typeof StreamQuery>;

/** The two SSE routes: one stream, documented for SDK clients and for Connect-style clients. */
export function sseRoutes(deps: SseDeps): LeanRoute[] {
  const respond = (ex: Exchange) => openStream(deps, ex);
  return [
    defineLeanRoute({
      method: 'get',
      path: '/api/flags/stream',
      summary: 'Server-Sent Events of flag changes: `connected`, then `flag-update` (full flag) per change; Last-Event-ID resumes',
      tags: ['streams'],
      auth: 'public',
      sdk: true,
      access: { capability: 'flags:read', per: 'flag' },
      query: StreamQuery.omit({ clientId: true }),
      respond,
    }),
    defineLeanRoute({
      method: 'get',
      path: '/api/connect/stream',
      summary: 'Server-Sent Events of flag changes for Connect-style clients (same messages as /api/flags/stream)',
      tags: ['streams'],
      auth: 'public',
      sdk: true,
      access: { capability: 'flags:read', per: 'flag' },
      query: StreamQuery,
      respond,
    }),
  ];
}

function openStream(deps: SseDeps, ex: Exchange): Promise<void> | undefined {
  const query = validateQuery(StreamQuery, Object.fromEntries(new URLSearchParams(ex.query)));
  if (query instanceof HttpError) throw query;
  // A bound project token streams its own service and environment (docs/api-reference.md#project-api-tokens).
  const serviceId = targetService(ex.principal, query.serviceId);
  if (serviceId === undefined) throw validationFailed([{ path: 'query.serviceId', message: 'Required' }]);
  query.environment = targetEnvironment(ex.principal, query.environment);
  const grant = deps.evaluation.grantNow(ex.principal, serviceId);
  if (grant === undefined) return deps.evaluation.grant(ex.principal, serviceId).then((g) => open(deps, ex, query, g));
  open(deps, ex, query, grant);
  return undefined;
}

function open(deps: SseDeps, ex: Exchange, query: StreamQuery, grant: ServiceGrant): void {
  const release = admitStream(deps, ex, ex.principal, grant.service.id, 'sse');
  if (release === undefined) return;
  openSse(deps.hub, ex.req, ex.res, {
    service: grant.service,
    visibility: grant.visibility,
    environment: query.environment,
    clientId: query.clientId,
    lastEventId: lastEventIdOf(ex, query.lastEventId),
    headers: ex.headers(),
    limits: deps.streamClient,
    release,
  });
}

/**
 * What every SSE stream passes before it opens (this one and OFREP's event stream): the server
 * is not shutting down, the client is still there, and the open-stream caps have a slot. The
 * slot's release, or undefined when the request is answered (429) or gone.
 */
export function admitStream(
  deps: Pick<SseDeps, 'hub' | 'streamLimits' | 'trustProxy'>,
  ex: Exchange,
  principal: Principal,
  serviceId: string,
  kind: StreamKind,
): ((reason: DisconnectReason) => void) | undefined {
  if (deps.hub.isClosed) throw serviceUnavailable('The server is shutting down; reconnect');
  // Gone while its service loaded: its 'close' has passed, so it must not take a slot.
  if (ex.req.socket.destroyed) return undefined;
  const admission = deps.streamLimits.acquire({ ip: ipBucket(clientIp(ex.req, deps.trustProxy)), principal, serviceId }, kind);
  if (admission.ok) return admission.release;
  ex.send(429, JSON.stringify(admission.error.toBody()), { 'Retry-After': String(STREAM_RETRY_AFTER_SECONDS) });
  return undefined;
}

/** Where a reconnecting client resumes: the Last-Event-ID header, else the query's. */
export function lastEventIdOf(ex: Exchange, fromQuery: string | undefined): string | undefined {
  const header = ex.req.headers['last-event-id'];
  return (typeof header === 'string' && header !== '' ? header : undefined) ?? fromQuery;
}
