import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../infra/logger';
import { ENVIRONMENTS, type Environment, type FlagChangeEvent, type FlagRecord } from '../flags/types';
import type { ServiceSnapshot, SnapshotChange, SnapshotStore, Visibility } from './snapshots';

/** One message of a flag stream, as SSE JSON (`data:`) and as the Connect EventStreamResponse. */
export interface StreamMessage {
  type: 'connected' | 'flag-update' | 'flag-deleted';
  /** Resume point: send it back as Last-Event-ID (SSE) or last_event_id (Connect). */
  id: string;
  serviceId: string;
  environment: Environment | null;
  flagKey?: string;
  event?: FlagChangeEvent['event'];
  flag?: FlagRecord;
  timestamp: string;
  clientId?: string;
}

/** A retained change, with its frames rendered lazily once per visibility. */
interface RingEntry {
  id: string;
  environment: Environment;
  /** Event time in ms (the commit time the outbox recorded): the same on every replica. */
  at: number;
  change: SnapshotChange;
  frames: Partial<Record<Visibility, StreamMessage | null>>;
  sse: Partial<Record<Visibility, string | null>>;
}

interface Ring {
  entries: RingEntry[];
  /** Event time of the newest change dropped from the ring (older ones cannot be replayed). */
  evictedUntil: number;
}

export interface Subscriber {
  serviceId: string;
  environment: Environment | undefined;
  visibility: Visibility;
  deliver(message: StreamMessage, sseFrame: () => string): void;
  heartbeat(): void;
  close(): void;
}

export interface StreamOptions {
  heartbeatMs: number;
  /** Changes kept per service for Last-Event-ID replay, by count and by age. */
  replayMaxEvents: number;
  replayMaxAgeMs: number;
  /** A client whose unsent output exceeds this is disconnected (it reconnects and replays). */
  maxBufferedBytes: number;
}

const CURSOR_PREFIX = 'c';
/** Clock skew allowance between replicas when resuming from a time cursor (duplicates are harmless). */
const CURSOR_SKEW_MS = 2_000;

/**
 * Fan-out of flag changes to open streams (SSE on /api/flags/stream and /api/connect/stream,
 * and the Connect/gRPC-Web EventStream). Changes come from the snapshot store (so a stream
 * never announces a flag the evaluation path does not serve yet); each change is rendered once
 * per visibility and written to every matching subscriber. A bounded ring per service keeps
 * recent changes for replay after a reconnect. One timer sends heartbeats to every stream.
 * Per stream the cost is a socket and one small object, so 10,000 streams fit in tens of MB.
 */
export class StreamHub {
  private readonly subscribers = new Map<string, Set<Subscriber>>();
  private readonly rings = new Map<string, Ring>();
  private readonly startedAt = Date.now();
  private timer?: NodeJS.Timeout;
  private count = 0;
  private closed = false;

  constructor(
    private readonly snapshots: SnapshotStore,
    private readonly opts: StreamOptions,
    private readonly logger: Logger,
  ) {
    snapshots.onChange((change) => this.publish(change));
  }

  start(): void {
    this.timer = setInterval(() => this.beat(), this.opts.heartbeatMs);
    this.timer.unref();
  }

  /** Ends every stream (shutdown must not wait for clients to hang up). */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const set of this.subscribers.values()) for (const s of [...set]) s.close();
    this.subscribers.clear();
  }

  get size(): number {
    return this.count;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  add(s: Subscriber): () => void {
    let set = this.subscribers.get(s.serviceId);
    if (set === undefined) {
      set = new Set();
      this.subscribers.set(s.serviceId, set);
    }
    set.add(s);
    this.count++;
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      this.count--;
      const current = this.subscribers.get(s.serviceId);
      current?.delete(s);
      if (current?.size === 0) this.subscribers.delete(s.serviceId);
    };
  }

  /** The id a new stream starts from: the newest retained change of the service, or a time cursor. */
  cursor(serviceId: string): string {
    const ring = this.rings.get(serviceId);
    const last = ring?.entries[ring.entries.length - 1];
    return last ? last.id : `${CURSOR_PREFIX}${Date.now()}`;
  }

  /**
   * What a reconnecting client missed since `lastEventId`: the retained changes after it, or
   * (when it is older than the window or unknown) every visible flag's current state as
   * `flag-update` messages, so the client converges either way.
   */
  replay(service: ServiceSnapshot, environment: Environment | undefined, visibility: Visibility, lastEventId: string): StreamMessage[] {
    const ring = this.rings.get(service.id);
    const entries = ring?.entries ?? [];
    let from = -1;
    const index = entries.findIndex((e) => e.id === lastEventId);
    if (index >= 0) from = index + 1;
    else if (/^c\d+$/.test(lastEventId)) {
      const since = Number(lastEventId.slice(1)) - CURSOR_SKEW_MS;
      const coveredSince = Math.max(ring?.evictedUntil ?? 0, this.startedAt);
      if (coveredSince <= since) {
        from = entries.findIndex((e) => e.at > since);
        if (from < 0) from = entries.length;
      }
    }
    if (from >= 0) {
      const out: StreamMessage[] = [];
      for (const entry of entries.slice(from)) {
        if (environment !== undefined && entry.environment !== environment) continue;
        const message = this.render(entry, visibility);
        if (message) out.push(message);
      }
      return out;
    }
    return this.currentState(service, environment, visibility);
  }

  private currentState(service: ServiceSnapshot, environment: Environment | undefined, visibility: Visibility): StreamMessage[] {
    const id = this.cursor(service.id);
    const out: StreamMessage[] = [];
    for (const env of environment ? [environment] : ENVIRONMENTS) {
      for (const entry of service.environments[env].visible(visibility)) {
        out.push({
          type: 'flag-update',
          id,
          serviceId: service.id,
          environment: env,
          flagKey: entry.record.key,
          event: 'flag.updated',
          flag: entry.record,
          timestamp: entry.record.updatedAt,
        });
      }
    }
    return out;
  }

  private publish(change: SnapshotChange): void {
    const { event } = change;
    const entry: RingEntry = {
      id: event.id,
      environment: event.data.environment,
      at: Date.parse(event.timestamp) || Date.now(),
      change,
      frames: {},
      sse: {},
    };
    this.retain(event.data.serviceId, entry);
    const set = this.subscribers.get(event.data.serviceId);
    if (set === undefined) return;
    for (const s of set) {
      if (s.environment !== undefined && s.environment !== entry.environment) continue;
      const message = this.render(entry, s.visibility);
      if (message === null) continue;
      s.deliver(message, () => this.sseFrame(entry, s.visibility));
    }
  }

  private retain(serviceId: string, entry: RingEntry) {
    let ring = this.rings.get(serviceId);
    if (ring === undefined) {
      ring = { entries: [], evictedUntil: 0 };
      this.rings.set(serviceId, ring);
    }
    ring.entries.push(entry);
    const oldestAllowed = Date.now() - this.opts.replayMaxAgeMs;
    let drop = 0;
    while (
      drop < ring.entries.length - 1 &&
      (ring.entries.length - drop > this.opts.replayMaxEvents || ring.entries[drop].at < oldestAllowed)
    ) {
      ring.evictedUntil = Math.max(ring.evictedUntil, ring.entries[drop].at);
      drop++;
    }
    if (drop > 0) ring.entries.splice(0, drop);
  }

  /**
   * The message a subscriber with `visibility` gets for a change, or null for none: callers
   * who see only public flags get updates of public flags, and a `flag-deleted` when a flag
   * they could see is deleted or stops being public.
   */
  private render(entry: RingEntry, visibility: Visibility): StreamMessage | null {
    const cached = entry.frames[visibility];
    if (cached !== undefined) return cached;
    const { event, previous } = entry.change;
    const after = event.flag;
    const visibleAfter = after !== null && (visibility === 'all' || after.isPublic);
    const visibleBefore = previous !== undefined && (visibility === 'all' || previous.isPublic);
    let message: StreamMessage | null = null;
    const base = { id: entry.id, serviceId: event.data.serviceId, environment: entry.environment, flagKey: event.data.flagKey, timestamp: event.timestamp };
    if (visibleAfter) message = { type: 'flag-update', ...base, event: event.event, flag: after };
    else if (visibleBefore || (after === null && visibility === 'all')) message = { type: 'flag-deleted', ...base, event: 'flag.deleted' };
    entry.frames[visibility] = message;
    return message;
  }

  private sseFrame(entry: RingEntry, visibility: Visibility): string {
    const cached = entry.sse[visibility];
    if (cached) return cached;
    const message = this.render(entry, visibility);
    const frame = message ? sseFrame(message) : '';
    entry.sse[visibility] = frame;
    return frame;
  }

  private beat() {
    for (const set of this.subscribers.values()) {
      for (const s of set) {
        try {
          s.heartbeat();
        } catch (error) {
          this.logger.warn({ err: error }, 'stream heartbeat failed');
          s.close();
        }
      }
    }
  }
}

export function sseFrame(message: StreamMessage): string {
  return `id: ${message.id}\ndata: ${JSON.stringify(message)}\n\n`;
}

/** An SSE subscriber writing to a response; it closes itself when the client falls too far behind. */
export function sseSubscriber(
  res: ServerResponse,
  target: { serviceId: string; environment: Environment | undefined; visibility: Visibility },
  maxBufferedBytes: number,
): Subscriber {
  const write = (text: string) => {
    if (res.writableEnded || res.destroyed) return;
    if (res.writableLength > maxBufferedBytes) {
      res.destroy();
      return;
    }
    res.write(text);
  };
  return {
    ...target,
    deliver: (_message, frame) => write(frame()),
    heartbeat: () => write(`: heartbeat ${Date.now()}\n\n`),
    close: () => {
      if (!res.writableEnded) res.end();
    },
  };
}

export interface SseOpen {
  service: ServiceSnapshot;
  visibility: Visibility;
  environment: Environment | undefined;
  clientId: string | undefined;
  lastEventId: string | undefined;
  /** Headers every answer carries (request id, rate limits). */
  headers: Record<string, string | number>;
  maxBufferedBytes: number;
}

/**
 * Starts an SSE response: `connected` (with the resume id), the replay after Last-Event-ID,
 * then live changes. All synchronous, so no change can slip between replay and subscription.
 */
export function openSse(hub: StreamHub, req: IncomingMessage, res: ServerResponse, o: SseOpen): void {
  res.writeHead(200, {
    ...o.headers,
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache, no-transform',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  req.socket.setTimeout(0);
  req.socket.setNoDelay(true);
  req.socket.setKeepAlive(true, 30_000);
  const serviceId = o.service.id;
  const connected: StreamMessage = {
    type: 'connected',
    id: hub.cursor(serviceId),
    serviceId,
    environment: o.environment ?? null,
    timestamp: new Date().toISOString(),
    ...(o.clientId ? { clientId: o.clientId } : {}),
  };
  let head = 'retry: 3000\n';
  // On a resume the client keeps its Last-Event-ID until a replayed change moves it on.
  head += o.lastEventId ? `data: ${JSON.stringify(connected)}\n\n` : sseFrame(connected);
  if (o.lastEventId) for (const message of hub.replay(o.service, o.environment, o.visibility, o.lastEventId)) head += sseFrame(message);
  res.write(head);
  const remove = hub.add(sseSubscriber(res, { serviceId, environment: o.environment, visibility: o.visibility }, o.maxBufferedBytes));
  res.once('close', remove);
}
