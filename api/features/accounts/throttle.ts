import { retryLater, unauthorized } from '../../http/errors';
import type { Cache } from '../../infra/cache';
import { sha256Hex } from '../../infra/ids';

const secondsUntil = (ms: number) => (ms - Date.now()) / 1000;
/** Keys never hold an address in clear: the shared cache is not where e-mails should leak from. */
const addressKey = (email: string) => sha256Hex(email.trim().toLowerCase()).slice(0, 32);

export interface AuthThrottleOptions {
  /** Requests per client IP to /api/auth/* per window. */
  perIp: number;
  ipWindowSeconds: number;
  /** Failed sign-ins of one account before it locks. */
  threshold: number;
  baseSeconds: number;
  maxSeconds: number;
}

/** Failures are forgotten a day after the first one (or at once on a successful sign-in). */
const FAILURE_WINDOW_SECONDS = 24 * 3600;
/** Longest one sign-in may hold its account's attempt slot (a crashed replica frees it then). */
const ATTEMPT_SLOT_SECONDS = 30;

/**
 * Brute-force protection for sign-in, kept in the shared cache so every replica sees the same
 * counts. Per client IP (IPv6 by /64): a fixed-window budget over every /api/auth/* request.
 * Per account: after `threshold` failed sign-ins each further failure locks the account for
 * base * 2^k seconds (capped), during which even the right password gets 429. Unknown e-mails
 * are counted and locked exactly like real accounts, so the answers never tell them apart.
 */
export class AuthThrottle {
  constructor(
    private readonly cache: Cache,
    private readonly opts: AuthThrottleOptions,
  ) {}

  /** Counts one /api/auth/* request of this client; 429 past the budget. */
  async checkIp(bucket: string): Promise<void> {
    const { count, resetMs } = await this.cache.hit(`auth:ip:${bucket}`, this.opts.ipWindowSeconds);
    if (count > this.opts.perIp) {
      throw retryLater(429, `Too many sign-in requests from this address: ${this.opts.perIp} per ${this.opts.ipWindowSeconds} seconds`, secondsUntil(resetMs));
    }
  }

  /**
   * Runs one sign-in attempt for `email`: `attempt` returns null for bad credentials (answered
   * 401 and counted) or the result of a successful sign-in (which clears the count). Attempts on
   * one account run one at a time, so a parallel burst cannot test more passwords than the
   * lockout allows.
   */
  async signIn<T>(email: string, attempt: () => Promise<T | null>): Promise<T> {
    const key = addressKey(email);
    if (!(await this.cache.setIfAbsent(`auth:busy:${key}`, '1', ATTEMPT_SLOT_SECONDS))) {
      throw retryLater(429, 'Another sign-in for this account is in progress; try again in a moment', 1);
    }
    try {
      const lockedUntil = Number(await this.cache.get(`auth:lock:${key}`));
      if (lockedUntil > Date.now()) {
        throw retryLater(429, 'Too many failed sign-ins for this account; try again later', secondsUntil(lockedUntil));
      }
      const result = await attempt();
      if (result !== null) {
        await Promise.all([this.cache.del(`auth:fail:${key}`), this.cache.del(`auth:lock:${key}`)]);
        return result;
      }
      const { count } = await this.cache.hit(`auth:fail:${key}`, FAILURE_WINDOW_SECONDS);
      if (count >= this.opts.threshold) {
        // 2^k grows past any cap quickly; the exponent is bounded so the number stays finite.
        const seconds = Math.min(this.opts.maxSeconds, this.opts.baseSeconds * 2 ** Math.min(count - this.opts.threshold, 30));
        await this.cache.set(`auth:lock:${key}`, String(Date.now() + seconds * 1000), seconds);
      }
      throw unauthorized('Invalid e-mail or password');
    } finally {
      await this.cache.del(`auth:busy:${key}`);
    }
  }
}

export interface SendThrottleOptions {
  perUser: number;
  perRecipient: number;
  windowSeconds: number;
}

/**
 * Mail (and test alerts) a signed-in user makes us send to an address of their choosing:
 * verification resends, alert-channel tests and recipient confirmations. Counted per user and
 * per recipient in the shared cache, so one account cannot turn the service into a mail cannon
 * and many accounts cannot flood one inbox.
 */
export class SendThrottle {
  constructor(
    private readonly cache: Cache,
    private readonly opts: SendThrottleOptions,
  ) {}

  /**
   * Counts one send by `userId` to each recipient (`id`: an e-mail address or a URL; `shown`:
   * how the 429 names it, as URLs can be credentials); 429 past either budget.
   */
  async consume(userId: string, recipients: { id: string; shown: string }[]): Promise<void> {
    const { windowSeconds, perUser, perRecipient } = this.opts;
    const user = await this.cache.hit(`send:user:${userId}`, windowSeconds);
    if (user.count > perUser) {
      throw retryLater(429, `Too many messages sent for this account: ${perUser} per ${windowSeconds} seconds`, secondsUntil(user.resetMs));
    }
    for (const recipient of recipients) {
      const hit = await this.cache.hit(`send:to:${addressKey(recipient.id)}`, windowSeconds);
      if (hit.count > perRecipient) {
        throw retryLater(429, `Too many messages sent to ${recipient.shown}: ${perRecipient} per ${windowSeconds} seconds`, secondsUntil(hit.resetMs));
      }
    }
  }
}
