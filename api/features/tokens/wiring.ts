import type { Authenticator } from '../../auth/authenticator';
import { CredentialCache } from '../../auth/credential-cache';
import { JwtCodec } from '../../auth/jwt';
import type { Config } from '../../config';
import type { ListenerRoutes } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { jwtAccessTokenResolver, opaqueTokenResolver } from './resolvers';
import { JwtRevocationList } from './revocation';
import { TOKEN_REFRESH_PATH, tokenRoutes } from './routes';
import { ProjectTokenService, type CachedOpaqueToken, type JwtFamily } from './service';
import { ProjectTokenStore } from './store';

/**
 * Resolved secrets are memoised per process this long at most; revocation also evicts them
 * everywhere through pub/sub, so this only bounds a lost message (docs/data-plane.md).
 */
export const CREDENTIAL_CACHE_TTL_MS = 5_000;
/** Entries each resolved-credential cache keeps per process. */
export const CREDENTIAL_CACHE_MAX_ENTRIES = 10_000;
const SWEEP_INTERVAL_MS = 3600_000;

export interface TokenFeature {
  routes: ListenerRoutes;
  tokens: ProjectTokenService;
  /** Signs and verifies JWT access tokens (the evaluation data plane verifies them too). */
  jwt: JwtCodec;
  stop(): Promise<void>;
}

/** Project API tokens, opaque and JWT: their bearer resolvers go onto the authenticator, their routes into the control plane. */
export async function createTokenFeature(deps: { config: Config; sql: Sql; cache: Cache; logger: Logger; authenticator: Authenticator }): Promise<TokenFeature> {
  const { config, sql, cache, logger, authenticator } = deps;
  const jwt = await JwtCodec.create(
    {
      privateKeyPem: config.JWT_PRIVATE_KEY,
      keyId: config.JWT_KEY_ID,
      publicKeysJson: config.JWT_PUBLIC_KEYS,
      dataDir: config.dataDir,
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
    },
    logger,
  );
  const cacheOptions = { cache, ttlMs: CREDENTIAL_CACHE_TTL_MS, maxEntries: CREDENTIAL_CACHE_MAX_ENTRIES, logger };
  const opaqueCache = new CredentialCache<CachedOpaqueToken>({ ...cacheOptions, channel: 'auth:evict:project-token' });
  const familyCache = new CredentialCache<JwtFamily>({ ...cacheOptions, channel: 'auth:evict:jwt-family' });
  const caches = [opaqueCache, familyCache];
  await Promise.all(caches.map((c) => c.start()));

  const revocations = new JwtRevocationList({ sql, cache, logger });
  const tokens = new ProjectTokenService({ sql, store: new ProjectTokenStore(), jwt, revocations, opaqueCache, familyCache, logger });
  authenticator.addResolver(opaqueTokenResolver(tokens));
  authenticator.addResolver(jwtAccessTokenResolver(tokens));
  authenticator.addSelfAuthenticatedPath(TOKEN_REFRESH_PATH);

  const sweep = setInterval(() => {
    revocations.sweepExpired().catch((error) => logger.warn({ err: error }, 'sweeping expired JWT records failed'));
  }, SWEEP_INTERVAL_MS);
  sweep.unref();

  return {
    routes: { control: tokenRoutes({ tokens, jwt }) },
    tokens,
    jwt,
    async stop() {
      clearInterval(sweep);
      await Promise.all(caches.map((c) => c.stop()));
    },
  };
}
