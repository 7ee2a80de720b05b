import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { retryLater } from '../../http/errors';

const KEY_LENGTH = 64;
const MAXMEM = 256 * 1024 * 1024;

function derive(password: string, salt: Buffer, params: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, params, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

export interface PasswordHasherOptions {
  costLog2: number;
  /** Hashes computed at once: each holds one libuv pool thread for ~100 ms. */
  concurrency: number;
  /** Hashes allowed to wait; past it callers get 503 instead of an ever longer queue. */
  maxQueue: number;
}

/**
 * `scrypt$N$r$p$salt$hash`: parameters travel with the hash so the cost can be raised later.
 * Production uses OWASP's N=2^17 (~100 ms, 128 MiB); tests lower it through SCRYPT_COST_LOG2.
 *
 * scrypt runs on libuv's thread pool (4 threads unless UV_THREADPOOL_SIZE says otherwise), which
 * DNS lookups, file reads and zlib share: a burst of sign-ins must not occupy all of it, so at
 * most `concurrency` hashes run at once and the rest wait in a bounded FIFO queue.
 */
export class PasswordHasher {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly opts: PasswordHasherOptions) {}

  /** Hashes running and waiting now (a gauge). */
  load(): { running: number; queued: number } {
    return { running: this.running, queued: this.waiting.length };
  }

  hash(password: string): Promise<string> {
    const params = { N: 2 ** this.opts.costLog2, r: 8, p: 1, maxmem: MAXMEM };
    const salt = randomBytes(16);
    return this.bounded(async () => {
      const key = await derive(password, salt, params);
      return ['scrypt', params.N, params.r, params.p, salt.toString('base64'), key.toString('base64')].join('$');
    });
  }

  verify(password: string, stored: string): Promise<boolean> {
    const [scheme, n, r, p, salt, hash] = stored.split('$');
    if (scheme !== 'scrypt' || !salt || !hash) return Promise.resolve(false);
    const expected = Buffer.from(hash, 'base64');
    return this.bounded(async () => {
      const actual = await derive(password, Buffer.from(salt, 'base64'), { N: Number(n), r: Number(r), p: Number(p), maxmem: MAXMEM });
      return actual.length === expected.length && timingSafeEqual(actual, expected);
    });
  }

  private async bounded<T>(work: () => Promise<T>): Promise<T> {
    if (this.running < this.opts.concurrency) this.running++;
    else if (this.waiting.length >= this.opts.maxQueue) throw retryLater(503, 'Too many sign-ins at once; try again in a moment', 1);
    // A finishing hash hands its slot straight to the next waiter, so `running` stays counted.
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
