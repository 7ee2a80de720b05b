import type { Authenticator } from '../../auth/authenticator';
import { CredentialCache } from '../../auth/credential-cache';
import type { ListenerRoutes } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { CREDENTIAL_CACHE_MAX_ENTRIES, CREDENTIAL_CACHE_TTL_MS } from '../tokens/wiring';
import { personalTokenResolver, personalTokenRoutes } from './routes';
import { PersonalTokenService, type CachedPersonalToken } from './service';
import { PersonalTokenStore } from './store';

export interface PersonalTokenFeature {
  routes: ListenerRoutes;
  /** CLI login issues personal tokens through it. */
  tokens: PersonalTokenService;
  stop(): Promise<void>;
}

/** Personal access tokens: the bearer resolver goes onto the authenticator, the routes into the control plane. */
export async function createPersonalTokenFeature(deps: { sql: Sql; cache: Cache; logger: Logger; authenticator: Authenticator }): Promise<PersonalTokenFeature> {
  const { sql, cache, logger } = deps;
  const resolvedTokens = new CredentialCache<CachedPersonalToken>({ cache, ttlMs: CREDENTIAL_CACHE_TTL_MS, maxEntries: CREDENTIAL_CACHE_MAX_ENTRIES, logger, channel: 'auth:evict:personal-token' });
  await resolvedTokens.start();
  const tokens = new PersonalTokenService({ sql, store: new PersonalTokenStore(), cache: resolvedTokens, logger });
  deps.authenticator.addResolver(personalTokenResolver(tokens));
  return {
    routes: { control: personalTokenRoutes({ tokens }) },
    tokens,
    stop: () => resolvedTokens.stop(),
  };
}
