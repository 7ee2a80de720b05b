import type { Authenticator } from '../../auth/authenticator';
import { CredentialCache } from '../../auth/credential-cache';
import { JwtCodec } from '../../auth/jwt';
import type { Config } from '../../config';
import type { AnyRoute } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { personalTokenResolver, personalTokenRoutes } from '../personal-tokens/routes';
import { PersonalTokenService, type CachedPersonalToken } from '../personal-tokens/service';
import { PersonalTokenStore } from '../personal-tokens/store';
import { jwtAccessTokenResolver, opaqueTokenResolver } from './resolvers';
import { JwtRevocationList } from './revocation';
import { TOKEN_REFRESH_PATH, tokenRoutes } from './routes';
import { ProjectTokenService, type CachedOpaqueToken } from './service';
import { ProjectTokenStore } from './store';

/**
 * Resolved secrets are memoised per process this long at most; revocation also evicts them
 * everywhere through pub/sub, so this only bounds a lost message (docs/limits.md: about 10 s).
 */
export const CREDENTIAL_CACHE_TTL_MS = 5_000;
const SWEEP_INTERVAL_MS = 3600_000;

export interface CredentialFeatures {
  routes: AnyRoute[];
  projectTokens: ProjectTokenService;
  personalTokens: PersonalTokenService;
  jwt: JwtCodec;
  revocations: JwtRevocationList;
  stop(): Promise<void>;
}

/**
 * Wires project API tokens (opaque and JWT) and personal access tokens: their bearer
 * resolvers go onto the authenticator, their routes into the control plane.
 */
export async function createCredentialFeatures(deps: {
  config: Config;
  sql: Sql;
  cache: Cache;
  logger: Logger;
  authenticator: Authenticator;
}): Promise<CredentialFeatures> {
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
  const cacheOptions = { cache, ttlMs: CREDENTIAL_CACHE_TTL_MS, maxEntries: 10_000, logger };
  const opaqueCache = new CredentialCache<CachedOpaqueToken>({ ...cacheOptions, channel: 'auth:evict:project-token' });
  const familyCache = new CredentialCache<{ createdBy: string | null }>({ ...cacheOptions, channel: 'auth:evict:jwt-family' });
  const personalCache = new CredentialCache<CachedPersonalToken>({ ...cacheOptions, channel: 'auth:evict:personal-token' });
  const caches = [opaqueCache, familyCache, personalCache];
  await Promise.all(caches.map((c) => c.start()));

  const revocations = new JwtRevocationList({ sql, cache, logger });
  const projectTokens = new ProjectTokenService({
    store: new ProjectTokenStore(sql),
    jwt,
    revocations,
    opaqueCache,
    familyCache,
    logger,
  });
  const personalTokens = new PersonalTokenService({ store: new PersonalTokenStore(sql), cache: personalCache, logger });

  authenticator.addResolver(opaqueTokenResolver(projectTokens));
  authenticator.addResolver(personalTokenResolver(personalTokens));
  authenticator.addResolver(jwtAccessTokenResolver(projectTokens));
  authenticator.addSelfAuthenticatedPath(TOKEN_REFRESH_PATH);

  const sweep = setInterval(() => {
    revocations.sweepExpired().catch((error) => logger.warn({ err: error }, 'sweeping expired JWT records failed'));
  }, SWEEP_INTERVAL_MS);
  sweep.unref();

  return {
    routes: [...tokenRoutes({ tokens: projectTokens, jwt }), ...personalTokenRoutes({ tokens: personalTokens })],
    projectTokens,
    personalTokens,
    jwt,
    revocations,
    async stop() {
      clearInterval(sweep);
      await Promise.all(caches.map((c) => c.stop()));
    },
  };
}
