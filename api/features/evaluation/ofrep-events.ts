import { z } from 'zod';
import { HttpError, forbidden, unauthorized } from '../../http/errors';
import { EnvironmentSchema, type Environment } from '../../domain/environments';
import { defineLeanRoute, type Exchange, type LeanRoute } from './lean';
import { issuerPrincipal, type ChannelTokens, type IssuerWatch } from './ofrep-channel';
import { validateQuery } from './schemas';
import type { EvaluationService } from './service';
import type { EnvironmentSnapshot, SnapshotStore } from './snapshots';
import { admitStream, lastEventIdOf } from './sse';
import type { StreamLimits } from './stream-limits';
import { openSse, type SseFrames, type StreamClientLimits, type StreamHub } from './streams';

/**
 * The OFREP event stream (ADR-0008) a bulk answer names in `eventStreams`: one SSE message
 *   id: <change id>
 *   event: message
 *   data: {"type":"refetchEvaluation","etag":"<flag configuration ETag>","lastModified":<Unix s>}
 * per flag change of the channel's service and environment, after the snapshot applied it. Ids
 * are the change ids of the flag-change bus, the same on every replica, so Last-Event-ID
 * resumes anywhere; the replay after it is one message per missed change (one in all when the
 * id is older than the hub's window). Heartbeats, the buffer and stall limits and the
 * open-stream caps are the flag stream's (StreamHub, stream-limits.ts): the stream counts
 * against the API token the channel was issued for.
 */
export const OFREP_EVENTS_PATH = '/api/ofrep/v1/event-stream';

/** What the web provider waits, with its tab hidden, before it closes the stream (ADR-0008's default). */
export const OFREP_INACTIVITY_DELAY_SEC = 120;

export interface OfrepEventDeps {
  evaluation: EvaluationService;
  snapshots: SnapshotStore;
  hub: StreamHub;
  channels: ChannelTokens;
  issuers: IssuerWatch;
  streamLimits: StreamLimits;
  streamClient: StreamClientLimits;
  trustProxy: number;
}

const EventStreamQuery = z.object({
  serviceId: z.string().min(1).max(128),
  environment: EnvironmentSchema,
  channel: z.string().max(4096).optional().describe('The channel token of the bulk answer (opens this stream only; required)'),
  etag: z.string().max(128).optional().describe('The flag configuration ETag the bulk answer was computed from'),
  lastEventId: z.string().max(256).optional().describe('Alternative to the Last-Event-ID header'),
});
type EventStreamQuery = z.infer<typeof EventStreamQuery>;

/** The flag configuration a refetchEvaluation announces: the snapshot's ETag and its lastModified in Unix seconds. */
export function flagConfigOf(env: EnvironmentSnapshot): { etag: string; lastModified: number } {
  return { etag: env.etag('all'), lastModified: Math.floor(env.lastModified / 1000) };
}

/** The stream's address, with its channel token and the configuration the bulk answer was computed from. */
export function eventStreamUrl(base: string, o: { serviceId: string; environment: Environment; channel: string; etag: string }): string {
  // encodeURIComponent costs a fraction of URLSearchParams; the stream route reads either form the same.
  const e = encodeURIComponent;
  return `${base}${OFREP_EVENTS_PATH}?serviceId=${e(o.serviceId)}&environment=${o.environment}&etag=${e(o.etag)}&channel=${e(o.channel)}`;
}

export function ofrepEventsRoute(deps: OfrepEventDeps): LeanRoute {
  return defineLeanRoute({
    method: 'get',
    path: OFREP_EVENTS_PATH,
    summary:
      'OFREP event stream (ADR-0008): the URL a bulk answer names in eventStreams, with its own short-lived channel token; one `refetchEvaluation` message per flag change; Last-Event-ID resumes',
    tags: ['ofrep'],
    auth: 'public',
    sdk: true,
    query: EventStreamQuery,
    respond: (ex) => openEvents(deps, ex),
  });
}

async function openEvents(deps: OfrepEventDeps, ex: Exchange): Promise<void> {
  const query = validateQuery(EventStreamQuery, Object.fromEntries(new URLSearchParams(ex.query)));
  if (query instanceof HttpError) throw query;
  if (!query.channel) throw unauthorized('An event-stream token is required: use the URL of a bulk evaluation answer');
  const claims = await deps.channels.verify(query.channel);
  if (claims === null) throw unauthorized('Invalid or expired event-stream token: fetch the bulk evaluation again for a new one');
  if (claims.serviceId !== query.serviceId || claims.environment !== query.environment) {
    throw forbidden('This event-stream token is for another service or environment');
  }
  if (!(await deps.issuers.isActive(claims.tokenId))) throw unauthorized('The API token this event stream was issued for is revoked or expired');
  const principal = issuerPrincipal(claims);
  const grant = await deps.evaluation.grant(principal, claims.serviceId);
  if (grant.visibility !== 'all') throw grant.denial();
  const release = admitStream(deps, ex, principal, claims.serviceId, 'ofrep');
  if (release === undefined) return;
  const end = openSse(deps.hub, ex.req, ex.res, {
    service: grant.service,
    visibility: 'all',
    environment: claims.environment,
    clientId: undefined,
    lastEventId: lastEventIdOf(ex, query.lastEventId),
    headers: ex.headers(),
    limits: deps.streamClient,
    release: (reason) => {
      unwatch();
      release(reason);
    },
    frames: refetchFrames(deps.snapshots, query),
  });
  // Registered once open; the release above runs on 'close', which comes later.
  const unwatch = deps.issuers.watch(claims.tokenId, () => end('revoked'));
}

/**
 * refetchEvaluation frames of one stream. A replay of the hub's current state repeats one id
 * per flag: the stream writes each id once. A new stream whose bulk answer predates the current
 * configuration (`etag` in its URL) starts with a refetchEvaluation: the change fell between
 * the answer and the stream, and nothing else would tell the client.
 */
function refetchFrames(snapshots: SnapshotStore, query: EventStreamQuery): SseFrames {
  let lastId: string | undefined;
  const frame = (id: string): string => {
    lastId = id;
    const env = snapshots.get(query.serviceId)?.environments[query.environment];
    const data = env === undefined ? { type: 'refetchEvaluation' } : { type: 'refetchEvaluation', ...flagConfigOf(env) };
    return `id: ${id}\nevent: message\ndata: ${JSON.stringify(data)}\n\n`;
  };
  return {
    head(connected, resumed) {
      const env = snapshots.get(query.serviceId)?.environments[query.environment];
      if (!resumed && query.etag !== undefined && env !== undefined && env.etag('all') !== query.etag) return frame(connected.id);
      return ': connected\n\n';
    },
    frame(message) {
      if (message.type === 'connected' || message.id === lastId) return '';
      return frame(message.id);
    },
  };
}

/**
 * Requests waiting for this replica to apply a change an event stream announced (a bulk
 * re-fetch with flagConfigEtag / flagConfigLastModified that reached a replica behind the one
 * whose stream announced it). Checked after every change of their service and environment.
 */
export class FlagConfigWaiters {
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor(snapshots: SnapshotStore) {
    snapshots.onChange((change) => {
      const set = this.waiting.get(slot(change.event.data.serviceId, change.event.data.environment));
      if (set !== undefined) for (const check of [...set]) check();
    });
  }

  /** Resolves true as soon as `caughtUp()` holds after a change, false after `timeoutMs`. */
  until(serviceId: string, environment: Environment, caughtUp: () => boolean, timeoutMs: number): Promise<boolean> {
    const key = slot(serviceId, environment);
    return new Promise((resolve) => {
      const done = (result: boolean) => {
        clearTimeout(timer);
        const set = this.waiting.get(key);
        set?.delete(check);
        if (set?.size === 0) this.waiting.delete(key);
        resolve(result);
      };
      const check = () => {
        if (caughtUp()) done(true);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      let set = this.waiting.get(key);
      if (set === undefined) {
        set = new Set();
        this.waiting.set(key, set);
      }
      set.add(check);
    });
  }
}

const slot = (serviceId: string, environment: string) => `${serviceId}\u0000${environment}`;
