import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../infra/logger';
import type { DisconnectReason } from '../../lib/metrics/metrics';
import { ENVIRONMENTS, type Environment } from '../../domain/environments';
import type { FlagChangeEvent, FlagRecord } from '../flags/types';
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
  /** Ends the stream from the server's side, saying why. */
  close(reason: DisconnectReason): void;
}

export interface StreamOptions {
  heartbeatMs: number;
  /** Changes kept per service for Last-Event-ID replay, by count and by age. */
  replayMaxEvents: number;
  replayMaxAgeMs: number;
}

/** What one stream client may cost before it is dropped (it reconnects and replays). */
export interface StreamClientLimits {
  /** Output waiting for the client (Node's socket buffer and frames queued behind it), in bytes. */
  maxBufferedBytes: number;
  /** How long the socket may stay backed up (no 'drain') before the client counts as not reading. */
  stallTimeoutMs: number;
}

/** How a stream writes its messages, when not as the flag stream's `connected` / `flag-update` frames (OFREP's event stream). */
export interface SseFrames {
  /** What the stream opens with, after `retry:`; `resumed` when the client sent a Last-Event-ID it keeps. */
  head(connected: StreamMessage, resumed: boolean): string;
  /** One message's frame, replayed or live ('' writes nothing). */
  frame(message: StreamMessage): string;
}

/** Replays are written in pieces of about this size, the next only after the socket took the last. */
const CHUNK_BYTES = 64 * 1024;

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
    for (const set of this.subscribers.values()) for (const s of [...set]) s.close('shutdown');
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
   * `flag-update` messages, so the client converges either way. Rendered lazily, as the client
   * takes them: a replay of thousands of flags is never held in memory as a whole.
   */
  replay(service: ServiceSnapshot, environment: Environment | undefined, visibility: Visibility, lastEventId: string): Iterable<StreamMessage> {
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
    if (from >= 0) return this.retained(entries.slice(from), environment, visibility);
    return this.currentState(service, environment, visibility, this.cursor(service.id));
  }

  private *retained(entries: RingEntry[], environment: Environment | undefined, visibility: Visibility): Iterable<StreamMessage> {
    for (const entry of entries) {
      if (environment !== undefined && entry.environment !== environment) continue;
      const message = this.render(entry, visibility);
      if (message) yield message;
    }
  }

  /** Walks the live snapshot: a flag changed meanwhile shows its newer state, and its live message follows anyway. */
  private *currentState(service: ServiceSnapshot, environment: Environment | undefined, visibility: Visibility, id: string): Iterable<StreamMessage> {
    for (const env of environment ? [environment] : ENVIRONMENTS) {
      for (const entry of service.environments[env].visible(visibility)) {
        yield {
          type: 'flag-update',
          id,
          serviceId: service.id,
          environment: env,
          flagKey: entry.record.key,
          event: 'flag.updated',
          flag: entry.record,
          timestamp: entry.record.updatedAt,
        };
      }
    }
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
          s.close('server');
        }
      }
    }
  }
}

export function sseFrame(message: StreamMessage): string {
  return `id: ${message.id}\ndata: ${JSON.stringify(message)}\n\n`;
}

/**
 * Drops a response whose client stopped reading: armed when the socket no longer takes output
 * (`writableNeedDrain`), disarmed by 'drain'; past `timeoutMs` the response is destroyed, which
 * ends the stream and frees its slot.
 */
export class StallGuard {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly timeoutMs: number,
    private readonly onDrain?: () => void,
    /** Told before a stalled response is destroyed (its stream ends as a slow client). */
    private readonly onStall?: () => void,
  ) {}

  /** Call after a write (or whenever the stream is touched): arms the timer if the socket is backed up. */
  check(): void {
    if (this.timer !== undefined || !this.res.writableNeedDrain) return;
    this.timer = setTimeout(() => {
      this.onStall?.();
      this.res.destroy();
    }, this.timeoutMs);
    this.timer.unref();
    this.res.once('drain', this.drained);
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.res.off('drain', this.drained);
  }

  private readonly drained = () => {
    this.stop();
    this.onDrain?.();
  };
}

/**
 * An SSE client. Output goes out only while the socket takes it: the replay is rendered a
 * chunk at a time, each after the previous one drained; live changes that arrive meanwhile wait
 * behind it in order, up to `maxBufferedBytes`; a client that does not drain within
 * `stallTimeoutMs` is dropped. So a client that stops reading costs the server about
 * `maxBufferedBytes` at most, and only until the stall timeout.
 */
class SseClient implements Subscriber {
  readonly serviceId: string;
  readonly environment: Environment | undefined;
  readonly visibility: Visibility;
  private replay: Iterator<StreamMessage> | undefined;
  private readonly waiting: string[] = [];
  private waitingBytes = 0;
  private readonly guard: StallGuard;
  /** Why the server ended it; undefined while only the client may have. */
  endedBy: DisconnectReason | undefined;

  constructor(
    private readonly res: ServerResponse,
    target: { serviceId: string; environment: Environment | undefined; visibility: Visibility },
    private readonly limits: StreamClientLimits,
    private readonly frames: SseFrames | undefined,
  ) {
    this.serviceId = target.serviceId;
    this.environment = target.environment;
    this.visibility = target.visibility;
    this.guard = new StallGuard(
      res,
      limits.stallTimeoutMs,
      () => this.pump(),
      () => {
        this.endedBy ??= 'slow_client';
      },
    );
  }

  /** Writes the opening frames, then the replay (if any) as the client takes it. */
  start(head: string, replay: Iterable<StreamMessage> | undefined): void {
    this.replay = replay?.[Symbol.iterator]();
    this.write(head);
    this.pump();
  }

  deliver(message: StreamMessage, frame: () => string): void {
    if (this.gone) return;
    const text = this.frames === undefined ? frame() : this.frames.frame(message);
    if (text === '') return;
    if (!this.backedUp) return this.write(text);
    this.waitingBytes += text.length;
    if (this.waitingBytes + this.res.writableLength > this.limits.maxBufferedBytes) return this.drop();
    this.waiting.push(text);
  }

  /** A backed-up client gets none: output is waiting already, and the stall timeout decides. */
  heartbeat(): void {
    if (!this.gone && !this.backedUp) this.write(`: heartbeat ${Date.now()}\n\n`);
  }

  /** Ends the stream; one that cannot take its remaining output is cut instead of waited for. */
  close(reason: DisconnectReason): void {
    this.endedBy ??= reason;
    this.guard.stop();
    if (this.backedUp) this.drop();
    else if (!this.res.writableEnded) this.res.end();
  }

  /** The socket closed, by either side. */
  closed(): void {
    this.guard.stop();
    this.replay = undefined;
    this.waiting.length = 0;
  }

  private get gone(): boolean {
    return this.res.writableEnded || this.res.destroyed;
  }

  private get backedUp(): boolean {
    return this.replay !== undefined || this.waiting.length > 0 || this.res.writableNeedDrain;
  }

  /** Writes replay and waiting frames, a chunk at a time, while the socket takes them. */
  private pump(): void {
    while (!this.gone && !this.res.writableNeedDrain) {
      let chunk = '';
      while (chunk.length < CHUNK_BYTES && this.replay !== undefined) {
        const next = this.replay.next();
        if (next.done) this.replay = undefined;
        else chunk += this.frames === undefined ? sseFrame(next.value) : this.frames.frame(next.value);
      }
      while (chunk.length < CHUNK_BYTES && this.waiting.length > 0) {
        const text = this.waiting.shift()!;
        this.waitingBytes -= text.length;
        chunk += text;
      }
      if (chunk === '') return;
      this.write(chunk);
    }
  }

  private write(text: string): void {
    this.res.write(text);
    this.guard.check();
  }

  private drop(): void {
    this.endedBy ??= 'slow_client';
    this.closed();
    this.res.destroy();
  }
}

export interface SseOpen {
  service: ServiceSnapshot;
  visibility: Visibility;
  environment: Environment | undefined;
  clientId: string | undefined;
  lastEventId: string | undefined;
  /** Headers every answer carries (request id, rate limits). */
  headers: Record<string, string | number>;
  limits: StreamClientLimits;
  /** Gives back the stream's slot under the open-stream caps (stream-limits.ts), saying why it ended. */
  release: (reason: DisconnectReason) => void;
  /** Its own frames (OFREP's event stream); the flag stream's when absent. */
  frames?: SseFrames;
}

/**
 * Starts an SSE response: `connected` (with the resume id), the replay after Last-Event-ID,
 * then live changes. Subscribing and taking the replay happen together, synchronously, so no
 * change can slip between them; changes that arrive while the replay is still being written
 * wait behind it. Returns what ends the stream (from the server's side, for the reason given).
 */
export function openSse(hub: StreamHub, req: IncomingMessage, res: ServerResponse, o: SseOpen): (reason: DisconnectReason) => void {
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
  // On a resume the client keeps its Last-Event-ID until a replayed change moves it on.
  const opening = o.frames !== undefined ? o.frames.head(connected, o.lastEventId !== undefined) : o.lastEventId ? `data: ${JSON.stringify(connected)}\n\n` : sseFrame(connected);
  const head = `retry: 3000\n${opening}`;
  const client = new SseClient(res, { serviceId, environment: o.environment, visibility: o.visibility }, o.limits, o.frames);
  const replay = o.lastEventId ? hub.replay(o.service, o.environment, o.visibility, o.lastEventId) : undefined;
  const remove = hub.add(client);
  res.once('close', () => {
    client.closed();
    remove();
    o.release(client.endedBy ?? 'client');
  });
  client.start(head, replay);
  return (reason) => client.close(reason);
}
