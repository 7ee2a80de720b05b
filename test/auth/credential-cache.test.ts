import { randomBytes } from 'node:crypto';
import { CredentialCache } from '../../api/auth/credential-cache';
import { createCache, type Cache } from '../../api/infra/cache';
import { createLogger } from '../../api/infra/logger';
import { eventually } from '../support/harness';

/**
 * Revocation reaches other replicas through the shared cache's pub/sub, not by waiting out the
 * memo: with an hour-long TTL, only the eviction message can make the other replica forget.
 * (test/personal-tokens/propagation.test.ts checks the same end to end over HTTP.)
 */
const logger = createLogger('silent');
const HOUR = 3600_000;
let caches: Cache[] = [];
afterEach(async () => {
  await Promise.all(caches.map((c) => c.close()));
  caches = [];
});

function replicaPair(redisUrl: string): [CredentialCache<string>, CredentialCache<string>] {
  const prefix = `credcache-test:${randomBytes(4).toString('hex')}:`;
  const make = () => {
    const cache = createCache(redisUrl, prefix);
    caches.push(cache);
    return new CredentialCache<string>({ cache, channel: 'auth:evict:test', ttlMs: HOUR, maxEntries: 10, logger });
  };
  return [make(), make()];
}

it('an eviction on one replica removes the entry on another well before its TTL', async () => {
  if (!process.env.REDIS_URL) throw new Error('REDIS_URL not set: run through npm test or source scripts/test-infra.sh up');
  const [first, second] = replicaPair(process.env.REDIS_URL);
  await Promise.all([first.start(), second.start()]);
  first.set('k', 'one');
  second.set('k', 'one');
  second.set('other', 'two');
  await first.evict('k');
  expect(first.get('k')).toBeUndefined();
  await eventually(async () => second.get('k') === undefined);
  expect(second.get('other')).toBe('two');
  await Promise.all([first.stop(), second.stop()]);
});
