import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The time by which a request must be answered (docs/operations.md#faults-and-recovery). The HTTP
 * layer opens one per request; the backends read it: a transaction does not commit once it has
 * passed, and the request's answer waits for a commit already on the wire, so a request answered
 * 503 never commits afterwards.
 */
export class RequestDeadline {
  private expired = false;
  private readonly commits = new Set<Promise<unknown>>();

  constructor(public at: number) {}

  /** A route that waits on purpose (a canary's first stage) moves its own deadline. */
  extendTo(at: number): void {
    if (!this.expired) this.at = Math.max(this.at, at);
  }

  get passed(): boolean {
    return this.expired || Date.now() >= this.at;
  }

  /**
   * The request was answered (or its client left) before the deadline: work it left running,
   * e.g. a write after the answer, is no longer bound by it.
   */
  release(): void {
    if (!this.passed) this.at = Infinity;
  }

  /** Called by the backstop: from now on nothing of this request may commit. */
  expire(): void {
    this.expired = true;
  }

  /**
   * Called just before a transaction's COMMIT goes out: refuses once the deadline has passed
   * (the transaction rolls back), otherwise records the commit's outcome for the backstop.
   */
  beforeCommit(outcome: () => Promise<unknown>): void {
    if (this.passed) throw new BackendUnavailableError('postgres', 'the request deadline passed before the transaction could commit');
    const pending = outcome().catch(() => undefined);
    this.commits.add(pending);
    void pending.finally(() => this.commits.delete(pending));
  }

  /**
   * Settles once no commit of this request is on the wire, or after `maxWaitMs`: a COMMIT
   * whose connection died under it has an unknown outcome, and the request must still be answered.
   */
  async commitsSettled(maxWaitMs: number): Promise<void> {
    const giveUp = Date.now() + maxWaitMs;
    while (this.commits.size && Date.now() < giveUp) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled([...this.commits]), new Promise((resolve) => (timer = setTimeout(resolve, giveUp - Date.now())))]);
      clearTimeout(timer);
    }
  }
}

const current = new AsyncLocalStorage<RequestDeadline>();

/** Runs `fn` (and everything it starts) under `deadline`. */
export function withDeadline<T>(deadline: RequestDeadline, fn: () => T): T {
  return current.run(deadline, fn);
}

/** The deadline of the request this code runs for; undefined outside requests (relay loops, activities). */
export function currentDeadline(): RequestDeadline | undefined {
  return current.getStore();
}

export type Backend = 'postgres' | 'redis' | 'temporal';

/** A backend did not answer in time or is unreachable: answered 503 with Retry-After. */
export class BackendUnavailableError extends Error {
  constructor(
    readonly backend: Backend,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'BackendUnavailableError';
  }
}

// postgres.js connection failures, and the server's own "going away" classes (57P0x: admin or
// crash shutdown, cannot connect now; 08xxx: connection exceptions).
const POSTGRES_GONE = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', '57P01', '57P02', '57P03']);
// gRPC status codes: UNAVAILABLE, DEADLINE_EXCEEDED.
const TEMPORAL_GONE = new Set([14, 4]);

/**
 * Whether `error` says a backend is unreachable or too slow (rather than refusing this request):
 * those become 503 with Retry-After instead of a 500.
 */
export function isBackendUnavailable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof BackendUnavailableError) return true;
    const { code, name, message } = e as { code?: unknown; name?: unknown; message?: unknown };
    if (typeof code === 'string' && (POSTGRES_GONE.has(code) || code.startsWith('08'))) return true;
    // Temporal's ServiceError carries the gRPC error (numeric code, metadata) as its cause.
    if (typeof code === 'number' && 'metadata' in e && TEMPORAL_GONE.has(code)) return true;
    // ioredis: a command past commandTimeout, or refused while the connection is down.
    if (name === 'MaxRetriesPerRequestError') return true;
    if (typeof message === 'string' && /^(Command timed out|Connection is closed\.|Stream isn't writeable)/.test(message)) return true;
  }
  return false;
}
