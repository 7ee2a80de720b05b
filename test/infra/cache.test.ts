import { randomBytes } from 'node:crypto';
import { createCache, type Cache } from '../../api/infra/cache';

/** One suite, both implementations: the in-process twin must behave exactly like Redis. */
const implementations: [string, () => Cache][] = [['memory', () => createCache(undefined)]];
if (process.env.REDIS_URL) {
  implementations.push(['redis', () => createCache(process.env.REDIS_URL, `cache-test:${randomBytes(4).toString('hex')}:`)]);
} else {
  test('redis implementation needs REDIS_URL (npm test provides it)', () => {
    throw new Error('REDIS_URL not set: run through npm test or source scripts/test-infra.sh up');
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(implementations)('%s cache', (_name, make) => {
  let cache: Cache;
  beforeEach(() => {
    cache = make();
  });
  afterEach(() => cache.close());

  it('gets, sets and deletes strings', async () => {
    expect(await cache.get('a')).toBeNull();
    await cache.set('a', 'one');
    expect(await cache.get('a')).toBe('one');
    await cache.set('a', 'two');
    expect(await cache.get('a')).toBe('two');
    await cache.del('a');
    expect(await cache.get('a')).toBeNull();
  });

  // TTLs and windows of a few seconds, so a loaded machine still reads before they end; each
  // test then waits until the end has surely passed (measured from before the write).
  it('expires values after their TTL', async () => {
    const written = Date.now();
    await cache.set('short', 'x', 3);
    expect(await cache.get('short')).toBe('x');
    await sleep(written + 3100 - Date.now());
    expect(await cache.get('short')).toBeNull();
  });

  it('setIfAbsent stores only once until the value expires', async () => {
    const written = Date.now();
    expect(await cache.setIfAbsent('claim', 'first', 3)).toBe(true);
    expect(await cache.setIfAbsent('claim', 'second', 3)).toBe(false);
    expect(await cache.get('claim')).toBe('first');
    await sleep(written + 3100 - Date.now());
    expect(await cache.setIfAbsent('claim', 'third', 3)).toBe(true);
  });

  it('counts hits atomically within a window and resets after it', async () => {
    const before = Date.now();
    const results = await Promise.all(Array.from({ length: 50 }, () => cache.hit('window', 3)));
    expect(results.map((r) => r.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const reset = results[0].resetMs;
    expect(reset).toBeGreaterThanOrEqual(before);
    expect(reset).toBeLessThanOrEqual(Date.now() + 3000);
    await sleep(reset + 100 - Date.now());
    expect((await cache.hit('window', 3)).count).toBe(1);
  });

  it('keeps sets', async () => {
    await cache.sadd('s', 'a', 'b', 'b');
    expect((await cache.smembers('s')).sort()).toEqual(['a', 'b']);
    expect(await cache.sismember('s', 'a')).toBe(true);
    await cache.srem('s', 'a');
    expect(await cache.sismember('s', 'a')).toBe(false);
    expect(await cache.smembers('s')).toEqual(['b']);
    expect(await cache.smembers('missing')).toEqual([]);
  });

  it('delivers published messages to every subscriber until unsubscribed', async () => {
    const a: string[] = [];
    const b: string[] = [];
    const offA = await cache.subscribe('chan', (m) => a.push(m));
    const offB = await cache.subscribe('chan', (m) => b.push(m));
    await cache.publish('chan', 'one');
    await waitFor(() => a.length === 1 && b.length === 1);
    await offA();
    await cache.publish('chan', 'two');
    await waitFor(() => b.length === 2);
    expect(a).toEqual(['one']);
    expect(b).toEqual(['one', 'two']);
    await offB();
  });

  it('never delivers a publish synchronously on the publisher stack', async () => {
    const seen: string[] = [];
    await cache.subscribe('async', (m) => seen.push(m));
    const publishing = cache.publish('async', 'x');
    expect(seen).toEqual([]);
    await publishing;
    await waitFor(() => seen.length === 1);
  });
});

async function waitFor(check: () => boolean, timeoutMs = 3000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(10);
  }
}
