import { EventEmitter } from 'node:events';
import Redis from 'ioredis';

/**
 * The narrow shared-state interface every replica uses: Redis in production, an in-process
 * twin on the embedded profile. Both pass test/infra/cache.test.ts.
 */
export interface Cache {
  readonly backend: 'redis' | 'memory';
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlSeconds?: number): Promise<void>;
  /** SET NX: true when this call stored the value (used for throttles and one-shot claims). */
  setIfAbsent(key: string, value: string, ttlSeconds: number): Promise<boolean>;
  del(key: string): Promise<void>;
  /**
   * Atomically adds `amount` (default 1) to a fixed-window counter; the window starts at the
   * first hit. Local rate limiters flush several hits at once through `amount`.
   */
  hit(key: string, windowSeconds: number, amount?: number): Promise<{ count: number; resetMs: number }>;
  sadd(key: string, ...members: string[]): Promise<void>;
  srem(key: string, ...members: string[]): Promise<void>;
  smembers(key: string): Promise<string[]>;
  sismember(key: string, member: string): Promise<boolean>;
  publish(channel: string, message: string): Promise<void>;
  /** Returns an unsubscribe function. */
  subscribe(channel: string, onMessage: (message: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** `commandTimeoutMs` bounds every Redis command, queued ones included, while Redis is away. */
export function createCache(redisUrl: string | undefined, keyPrefix = 'flags:', commandTimeoutMs = 3_000): Cache {
  return redisUrl ? new RedisCache(redisUrl, keyPrefix, commandTimeoutMs) : new MemoryCache();
}

// INCR and set the expiry on the first hit in one round trip, so concurrent replicas agree.
const HIT_SCRIPT = `
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}`;

class RedisCache implements Cache {
  readonly backend = 'redis' as const;
  private readonly client: Redis;
  private subscriber?: Redis;
  private readonly listeners = new EventEmitter();

  constructor(
    private readonly url: string,
    private readonly prefix: string,
    commandTimeoutMs: number,
  ) {
    // A command waits in the offline queue while Redis is away, but never longer than commandTimeout.
    this.client = new Redis(url, { keyPrefix: prefix, enableAutoPipelining: true, maxRetriesPerRequest: 3, commandTimeout: commandTimeoutMs, connectTimeout: commandTimeoutMs });
    this.client.defineCommand('hitWindow', { numberOfKeys: 1, lua: HIT_SCRIPT });
    this.listeners.setMaxListeners(0);
  }

  async get(key: string) {
    return this.client.get(key);
  }
  async set(key: string, value: string, ttlSeconds?: number) {
    if (ttlSeconds) await this.client.set(key, value, 'EX', Math.ceil(ttlSeconds));
    else await this.client.set(key, value);
  }
  async setIfAbsent(key: string, value: string, ttlSeconds: number) {
    const ok = await this.client.set(key, value, 'PX', Math.ceil(ttlSeconds * 1000), 'NX');
    return ok === 'OK';
  }
  async del(key: string) {
    await this.client.del(key);
  }
  async hit(key: string, windowSeconds: number, amount = 1) {
    const [count, ttl] = (await (this.client as any).hitWindow(key, windowSeconds * 1000, amount)) as [number, number];
    return { count, resetMs: Date.now() + ttl };
  }
  async sadd(key: string, ...members: string[]) {
    if (members.length) await this.client.sadd(key, ...members);
  }
  async srem(key: string, ...members: string[]) {
    if (members.length) await this.client.srem(key, ...members);
  }
  async smembers(key: string) {
    return this.client.smembers(key);
  }
  async sismember(key: string, member: string) {
    return (await this.client.sismember(key, member)) === 1;
  }
  async publish(channel: string, message: string) {
    await this.client.publish(this.prefix + channel, message);
  }
  async subscribe(channel: string, onMessage: (message: string) => void) {
    const full = this.prefix + channel;
    if (!this.subscriber) {
      // A subscribed connection cannot run other commands, hence a second one.
      this.subscriber = new Redis(this.url, { maxRetriesPerRequest: null });
      this.subscriber.on('message', (ch: string, msg: string) => this.listeners.emit(ch, msg));
    }
    if (this.listeners.listenerCount(full) === 0) await this.subscriber.subscribe(full);
    this.listeners.on(full, onMessage);
    return async () => {
      this.listeners.off(full, onMessage);
      if (this.listeners.listenerCount(full) === 0) await this.subscriber?.unsubscribe(full);
    };
  }
  async ping() {
    return this.client.ping();
  }
  async close() {
    this.subscriber?.disconnect();
    await this.client.quit().catch(() => this.client.disconnect());
  }
}

interface Entry {
  value: string | Set<string> | number;
  expiresAt: number;
}

/** Single-process twin of RedisCache with the same semantics (expiry, NX, windows, pub/sub). */
class MemoryCache implements Cache {
  readonly backend = 'memory' as const;
  private readonly entries = new Map<string, Entry>();
  private readonly bus = new EventEmitter();
  private readonly sweeper: NodeJS.Timeout;

  constructor() {
    this.bus.setMaxListeners(0);
    this.sweeper = setInterval(() => this.sweep(), 30_000);
    this.sweeper.unref();
  }

  private live(key: string): Entry | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e;
  }
  private sweep() {
    const now = Date.now();
    for (const [k, e] of this.entries) if (e.expiresAt <= now) this.entries.delete(k);
  }
  private setOf(key: string, create: boolean): Set<string> | undefined {
    const e = this.live(key);
    if (e && e.value instanceof Set) return e.value;
    if (e) throw new Error('WRONGTYPE Operation against a key holding the wrong kind of value');
    if (!create) return undefined;
    const s = new Set<string>();
    this.entries.set(key, { value: s, expiresAt: Infinity });
    return s;
  }

  async get(key: string) {
    const e = this.live(key);
    if (!e) return null;
    if (e.value instanceof Set) throw new Error('WRONGTYPE Operation against a key holding the wrong kind of value');
    return String(e.value);
  }
  async set(key: string, value: string, ttlSeconds?: number) {
    this.entries.set(key, { value, expiresAt: ttlSeconds ? Date.now() + ttlSeconds * 1000 : Infinity });
  }
  async setIfAbsent(key: string, value: string, ttlSeconds: number) {
    if (this.live(key)) return false;
    this.entries.set(key, { value, expiresAt: Date.now() + ttlSeconds * 1000 });
    return true;
  }
  async del(key: string) {
    this.entries.delete(key);
  }
  async hit(key: string, windowSeconds: number, amount = 1) {
    const e = this.live(key);
    if (!e) {
      const expiresAt = Date.now() + windowSeconds * 1000;
      this.entries.set(key, { value: amount, expiresAt });
      return { count: amount, resetMs: expiresAt };
    }
    e.value = Number(e.value) + amount;
    return { count: e.value, resetMs: e.expiresAt };
  }
  async sadd(key: string, ...members: string[]) {
    if (!members.length) return;
    const s = this.setOf(key, true)!;
    for (const m of members) s.add(m);
  }
  async srem(key: string, ...members: string[]) {
    const s = this.setOf(key, false);
    if (!s) return;
    for (const m of members) s.delete(m);
    if (s.size === 0) this.entries.delete(key);
  }
  async smembers(key: string) {
    return [...(this.setOf(key, false) ?? [])];
  }
  async sismember(key: string, member: string) {
    return this.setOf(key, false)?.has(member) ?? false;
  }
  async publish(channel: string, message: string) {
    // Asynchronous like Redis: a publisher never runs subscribers on its own stack.
    setImmediate(() => this.bus.emit(channel, message));
  }
  async subscribe(channel: string, onMessage: (message: string) => void) {
    this.bus.on(channel, onMessage);
    return async () => {
      this.bus.off(channel, onMessage);
    };
  }
  async close() {
    clearInterval(this.sweeper);
    this.bus.removeAllListeners();
  }
}
