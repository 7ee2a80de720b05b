import { Code, ConnectError } from '@connectrpc/connect';
import type { Logger } from '../../infra/logger';
import type { FlagdCredentials } from './credentials';

/**
 * The open flagd streams of this process (SyncFlags and EventStream): each one's outgoing
 * messages, and the two ways it ends besides its client leaving. Only errors end a stream
 * (docs/local-evaluation.md#streams): providers reconnect on an error, not after OK.
 * - Revocation: every `recheckMs` each distinct token of an open stream is verified again
 *   through the same bearer resolvers as every request (their memo is evicted on revocation,
 *   and lives CREDENTIAL_CACHE_TTL_MS at most), and the streams of a refused one end
 *   UNAUTHENTICATED.
 * - Shutdown: drain() ends every stream UNAVAILABLE, so providers reconnect to another replica.
 */

/** Messages waiting for a slow client, past which its stream ends (the sync stream keeps only the latest). */
const MAX_QUEUED = 1_000;

/**
 * The messages of one stream, written by the feed and read by the RPC's generator. `latestOnly`:
 * a new message replaces the unsent ones (a sync document supersedes the previous).
 */
export class Mailbox<T> {
  private items: T[] = [];
  private failure: ConnectError | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly latestOnly: boolean) {}

  put(item: T): void {
    if (this.failure !== undefined) return;
    if (this.latestOnly) this.items = [item];
    else if (this.items.length >= MAX_QUEUED) return this.fail(new ConnectError('The client does not read its stream', Code.ResourceExhausted));
    else this.items.push(item);
    this.wake?.();
  }

  /** Ends the stream with this error once the messages before it are out (the first failure wins). */
  fail(error: ConnectError): void {
    this.failure ??= error;
    this.wake?.();
  }

  get failed(): boolean {
    return this.failure !== undefined;
  }

  /** The messages as they come; throws the failure, never returns. */
  async *messages(): AsyncGenerator<T, never> {
    for (;;) {
      while (this.items.length > 0) yield this.items.shift()!;
      if (this.failure !== undefined) throw this.failure;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
  }
}

/** A stream's handle on the registry: the token whose revocation ends it, and its removal. */
export interface StreamRegistration {
  setToken(token: string): void;
  remove(): void;
}

interface OpenStream {
  mailbox: Mailbox<unknown>;
  /** The credential whose revocation ends it; undefined while an EventStream waits for one. */
  token: string | undefined;
}

export class FlagdStreams {
  private readonly open = new Set<OpenStream>();
  private timer?: NodeJS.Timeout;
  private checking = false;
  private closed = false;

  constructor(private readonly deps: { credentials: FlagdCredentials; recheckMs: number; logger: Logger }) {}

  start(): void {
    this.timer = setInterval(() => void this.recheck(), this.deps.recheckMs);
    this.timer.unref();
  }

  get size(): number {
    return this.open.size;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Registers a stream; the returned handle sets its token and removes it when it ends. */
  add(mailbox: Mailbox<unknown>, token: string | undefined): StreamRegistration {
    const stream: OpenStream = { mailbox, token };
    this.open.add(stream);
    if (this.closed) mailbox.fail(shuttingDown());
    return {
      setToken: (t) => {
        stream.token = t;
      },
      remove: () => {
        this.open.delete(stream);
      },
    };
  }

  /** Verifies each distinct token of the open streams once and ends the streams of refused ones. */
  async recheck(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const byToken = new Map<string, OpenStream[]>();
      for (const stream of this.open) {
        if (stream.token === undefined) continue;
        const list = byToken.get(stream.token);
        if (list) list.push(stream);
        else byToken.set(stream.token, [stream]);
      }
      for (const [token, streams] of byToken) {
        if (await this.deps.credentials.stillValid(token)) continue;
        for (const stream of streams) stream.mailbox.fail(new ConnectError('The token was revoked or expired', Code.Unauthenticated));
      }
    } catch (error) {
      this.deps.logger.error({ err: error }, 'flagd stream credential check failed');
    } finally {
      this.checking = false;
    }
  }

  /** Ends every open stream UNAVAILABLE and refuses new ones (shutdown). */
  drain(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const stream of this.open) stream.mailbox.fail(shuttingDown());
  }
}

const shuttingDown = () => new ConnectError('The server is shutting down', Code.Unavailable);
