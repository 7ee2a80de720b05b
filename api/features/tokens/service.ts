import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { CredentialCache } from '../../auth/credential-cache';
import { ACCESS_TOKEN_TTL_SECONDS, REFRESH_TOKEN_TTL_SECONDS, type JwtCodec } from '../../auth/jwt';
import { opaquePermissionsToScopes } from '../../auth/permissions';
import type { Principal, ProjectTokenPrincipal, TokenScope, UserRecord } from '../../auth/principal';
import type { TokenBinding } from '../../domain/token-binding';
import { forbidden, notFound, unauthorized, validationFailed } from '../../http/errors';
import { boundedMemo, newId, sha256Hex } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import { isBackendUnavailable } from '../../infra/deadline';
import type { Sql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit, type AuditActor } from '../audit/writer';
import type { JwtRevocationList, RevokedJti } from './revocation';
import type { IssuedJwt, ProjectTokenStore } from './store';
import { OPAQUE_TOKEN_PATTERN, OPAQUE_TOKEN_PREFIX, bindingOf, toTokenRecord, type CreateTokenInput, type ProjectTokenRecord, type TokenPair } from './types';

/** What the JWT family memo holds per token id. */
export interface JwtFamily {
  createdBy: string | null;
  scope: TokenBinding | null;
}

/** What the opaque-token memo holds per secret hash. */
export interface CachedOpaqueToken {
  principal: ProjectTokenPrincipal;
  expiresAtMs: number | null;
}

interface Client {
  ip?: string;
  userAgent?: string;
}

export interface ProjectTokenServiceDeps {
  sql: Sql;
  store: ProjectTokenStore;
  jwt: JwtCodec;
  revocations: JwtRevocationList;
  opaqueCache: CredentialCache<CachedOpaqueToken>;
  /** token id -> creator, for JWT principals (claims carry no user). Invalidated on revoke. */
  familyCache: CredentialCache<JwtFamily>;
  logger: Logger;
}

const REFRESH_REJECTED = 'Invalid, expired or revoked refresh token';

/** Secrets whose SHA-256 is remembered (all forgotten when full). */
const SECRET_HASHES_KEPT = 10_000;

/**
 * Project API tokens (docs/api-reference.md#project-api-tokens): opaque `fgr_` secrets and JWT
 * families with single-use refresh tokens. Managing them needs the settings capability (the routes'
 * access rules); the permission map in api/auth/permissions.ts decides what each scope grants.
 */
export class ProjectTokenService {
  /**
   * secret -> its SHA-256, so the hot path does not hash the same bearer on every request
   * (3 % of an evaluation's CPU). Only the hash is remembered here, never whether the token
   * is valid: that stays in the credential memo keyed by hash, which revocation evicts. Like
   * any token-checking server, this process holds recently seen secrets in memory; Postgres
   * holds only their hashes.
   */
  private readonly secretHash = boundedMemo(sha256Hex, SECRET_HASHES_KEPT);

  constructor(private readonly deps: ProjectTokenServiceDeps) {}

  async list(projectId: string): Promise<ProjectTokenRecord[]> {
    return (await this.deps.store.listActive(this.deps.sql, projectId)).map(toTokenRecord);
  }

  async listCreatedBy(user: UserRecord): Promise<ProjectTokenRecord[]> {
    return (await this.deps.store.listCreatedBy(this.deps.sql, user.id)).map(toTokenRecord);
  }

  async create(principal: Principal, projectId: string, input: CreateTokenInput, client: Client) {
    const tokenType = input.tokenType ?? (input.scopes ? 'jwt' : 'opaque');
    const scopes: TokenScope[] = tokenType === 'jwt' ? input.scopes! : opaquePermissionsToScopes(input.permissions ?? {});
    requireNoEscalation(principal, scopes);
    const scope: TokenBinding | null = input.scope ?? null;
    if (scope) await this.requireOwnService(projectId, scope.serviceId);
    const createdBy = principal.type === 'project_api_token' ? principal.createdBy : principal.type === 'anonymous' ? null : principal.user.id;
    const actor = actorFromPrincipal(principal, client);
    const id = newId('tok');

    if (tokenType === 'opaque') {
      const value = OPAQUE_TOKEN_PREFIX + randomBytes(32).toString('hex');
      const row = await this.deps.sql.begin(async (tx) => {
        const created = await this.deps.store.insert(tx, {
          id, projectId, name: input.name, tokenType, secretHash: sha256Hex(value), scopes,
          expiresAt: input.expiresAt ? new Date(input.expiresAt) : null, createdBy, scope,
        });
        await auditToken(tx, actor, 'token.create', created);
        return created;
      });
      return { token: toTokenRecord(row), value };
    }

    const { pair, jwts, refreshExpiresAt } = await this.issuePair(id, projectId, scopes);
    const row = await this.deps.sql.begin(async (tx) => {
      const created = await this.deps.store.insert(tx, {
        id, projectId, name: input.name, tokenType, secretHash: null, scopes, expiresAt: refreshExpiresAt, createdBy, scope,
      });
      await this.deps.store.insertJwts(tx, id, jwts);
      await auditToken(tx, actor, 'token.create', created);
      return created;
    });
    return { token: toTokenRecord(row), ...pair };
  }

  /** A bound token names a service of its own project (docs/api-reference.md#project-api-tokens). */
  private async requireOwnService(projectId: string, serviceId: string): Promise<void> {
    const owner = await this.deps.store.serviceProject(this.deps.sql, serviceId);
    if (owner !== projectId) throw validationFailed([{ path: 'body.scope.serviceId', message: 'no such service in this project' }]);
  }

  async revoke(principal: Principal, projectId: string, tokenId: string, client: Client): Promise<void> {
    const actor = actorFromPrincipal(principal, client);
    const result = await this.deps.sql.begin(async (tx) => {
      const row = await this.deps.store.markRevoked(tx, projectId, tokenId, 'revoked');
      if (!row) return null;
      const jtis = row.token_type === 'jwt' ? await this.deps.store.revokeFamilyJwts(tx, tokenId) : [];
      await auditToken(tx, actor, 'token.revoke', row);
      return { row, jtis };
    });
    if (!result) throw notFound('Token');
    await this.afterRevoke(result.row.secret_hash, tokenId, result.jtis);
  }

  /**
   * Exchanges a refresh token (docs/api-reference.md#project-api-tokens) for a new pair and
   * invalidates it at once. Presenting an already used refresh token is taken as theft: the whole
   * family is revoked.
   */
  async refresh(projectId: string, refreshToken: string, client: Client): Promise<TokenPair> {
    const claims = await this.deps.jwt.verify(refreshToken, 'refresh');
    if (!claims || claims.projectId !== projectId) throw unauthorized(REFRESH_REJECTED);
    const issued = await this.issuePair(claims.tokenId, projectId, claims.scopes);

    const outcome = await this.deps.sql.begin(async (tx) => {
      // Locking the family row serialises refreshes and revocations of one family.
      const family = await this.deps.store.lockForRefresh(tx, claims.tokenId, projectId);
      if (!family || family.revoked_at) return { kind: 'rejected' as const };
      const presented = await this.deps.store.lockJwt(tx, claims.jti, claims.tokenId);
      if (!presented || presented.kind !== 'refresh' || presented.revoked_at) return { kind: 'rejected' as const };
      if (presented.consumed_at) {
        await this.deps.store.markRevoked(tx, projectId, claims.tokenId, 'refresh_reuse');
        const jtis = await this.deps.store.revokeFamilyJwts(tx, claims.tokenId);
        const actor: AuditActor = { name: 'system:refresh-token-reuse', userId: null, ipAddress: client.ip, userAgent: client.userAgent };
        await auditToken(tx, actor, 'token.revoke', family, { reason: 'refresh token reuse detected', reusedJti: claims.jti });
        return { kind: 'reused' as const, jtis };
      }
      await this.deps.store.consumeJwt(tx, claims.jti);
      await this.deps.store.insertJwts(tx, claims.tokenId, issued.jwts);
      await this.deps.store.setExpiry(tx, claims.tokenId, issued.refreshExpiresAt);
      return { kind: 'rotated' as const };
    });

    if (outcome.kind === 'reused') {
      await this.afterRevoke(null, claims.tokenId, outcome.jtis);
      this.deps.logger.warn({ tokenId: claims.tokenId, projectId }, 'refresh token reuse: token family revoked');
      throw unauthorized('Refresh token reuse detected; every token of this family has been revoked');
    }
    if (outcome.kind === 'rejected') throw unauthorized(REFRESH_REJECTED);
    return issued.pair;
  }

  /**
   * Bearer resolution for `fgr_` secrets: hash, look up (memoised briefly), then expiry. A memo
   * hit answers synchronously, so the evaluation hot path waits on nothing.
   */
  resolveOpaque(secret: string): ProjectTokenPrincipal | null | Promise<ProjectTokenPrincipal | null> {
    if (!OPAQUE_TOKEN_PATTERN.test(secret)) return null;
    const hash = this.secretHash(secret);
    const entry = this.deps.opaqueCache.get(hash);
    return entry ? unexpired(entry) : this.loadOpaque(hash);
  }

  private async loadOpaque(hash: string): Promise<ProjectTokenPrincipal | null> {
    let row;
    try {
      row = await this.deps.store.findActiveBySecretHash(this.deps.sql, hash);
    } catch (error) {
      // Postgres is away: the last verified answer serves (api/auth/credential-cache.ts).
      const stale = isBackendUnavailable(error) ? this.deps.opaqueCache.stale(hash) : undefined;
      if (stale) return unexpired(stale);
      throw error;
    }
    // The index found it by hash; compare again in constant time so no path compares secrets naively.
    if (!row?.secret_hash || !timingSafeEqual(Buffer.from(row.secret_hash), Buffer.from(hash))) return null;
    const entry: CachedOpaqueToken = {
      principal: { type: 'project_api_token', tokenId: row.id, tokenType: 'opaque', projectId: row.project_id, scopes: row.scopes, createdBy: row.created_by, scope: bindingOf(row) },
      expiresAtMs: row.expires_at?.getTime() ?? null,
    };
    this.deps.opaqueCache.set(hash, entry);
    this.deps.store.touch(this.deps.sql, row.id).catch((error) => this.deps.logger.warn({ err: error }, 'could not record token use'));
    return unexpired(entry);
  }

  /** Bearer resolution for JWT access tokens: signature, iss/aud/exp, type, then the revocation list. */
  async resolveJwt(token: string): Promise<ProjectTokenPrincipal | null> {
    const claims = await this.deps.jwt.verify(token, 'access');
    if (!claims) return null;
    if (await this.deps.revocations.isRevoked(claims.jti)) return null;
    const family = this.deps.familyCache.get(claims.tokenId) ?? (await this.loadFamily(claims.tokenId));
    if (!family) return null;
    return { type: 'project_api_token', tokenId: claims.tokenId, tokenType: 'jwt', projectId: claims.projectId, scopes: claims.scopes, createdBy: family.createdBy, scope: family.scope };
  }

  private async loadFamily(tokenId: string): Promise<JwtFamily | undefined> {
    let row;
    try {
      row = await this.deps.store.findFamily(this.deps.sql, tokenId);
    } catch (error) {
      // Postgres is away: the last verified answer serves (api/auth/credential-cache.ts).
      const stale = isBackendUnavailable(error) ? this.deps.familyCache.stale(tokenId) : undefined;
      if (stale) return stale;
      throw error;
    }
    // Gone with its project, or revoked: the jti check above normally answers first.
    if (!row || row.revoked_at) return undefined;
    const family: JwtFamily = { createdBy: row.created_by, scope: bindingOf(row) };
    this.deps.familyCache.set(tokenId, family);
    return family;
  }

  private async afterRevoke(secretHash: string | null, tokenId: string, jtis: RevokedJti[]) {
    if (secretHash) await this.deps.opaqueCache.evict(secretHash);
    if (jtis.length) await this.deps.revocations.publish(jtis);
    await this.deps.familyCache.evict(tokenId);
  }

  private async issuePair(tokenId: string, projectId: string, scopes: TokenScope[]) {
    const iat = Math.floor(Date.now() / 1000);
    const access = { jti: newId('jti'), exp: iat + ACCESS_TOKEN_TTL_SECONDS };
    const refresh = { jti: newId('jti'), exp: iat + REFRESH_TOKEN_TTL_SECONDS };
    const common = { projectId, tokenId, scopes, iat };
    const [accessToken, refreshToken] = await Promise.all([
      this.deps.jwt.sign({ ...common, jti: access.jti, exp: access.exp, type: 'access' }),
      this.deps.jwt.sign({ ...common, jti: refresh.jti, exp: refresh.exp, type: 'refresh' }),
    ]);
    const accessExpiresAt = new Date(access.exp * 1000);
    const refreshExpiresAt = new Date(refresh.exp * 1000);
    const jwts: IssuedJwt[] = [
      { jti: access.jti, kind: 'access', expiresAt: accessExpiresAt },
      { jti: refresh.jti, kind: 'refresh', expiresAt: refreshExpiresAt },
    ];
    const pair: TokenPair = {
      accessToken,
      refreshToken,
      accessTokenExpiresAt: accessExpiresAt.toISOString(),
      refreshTokenExpiresAt: refreshExpiresAt.toISOString(),
    };
    return { pair, jwts, refreshExpiresAt };
  }
}

/**
 * A project token that may manage tokens cannot mint one with more power than itself; users
 * are bounded by their role already (settings:manage means owner or admin, who hold every scope).
 */
function requireNoEscalation(principal: Principal, scopes: TokenScope[]) {
  if (principal.type !== 'project_api_token') return;
  for (const scope of scopes) {
    if (!principal.scopes.includes(scope)) {
      throw forbidden(`You need '${scope}' permission to grant it to a new token`);
    }
  }
}

async function auditToken(
  tx: Parameters<typeof writeAudit>[0],
  actor: AuditActor,
  action: 'token.create' | 'token.revoke',
  row: Parameters<typeof toTokenRecord>[0],
  metadata: Record<string, unknown> = {},
) {
  const record = toTokenRecord(row);
  await writeAudit(tx, actor, {
    projectId: row.project_id,
    action,
    resourceType: 'token',
    resourceId: row.id,
    resourceName: row.name,
    before: action === 'token.revoke' ? record : null,
    after: action === 'token.create' ? record : null,
    metadata: { tokenType: row.token_type, ...metadata },
  });
}

function unexpired(entry: CachedOpaqueToken): ProjectTokenPrincipal | null {
  return entry.expiresAtMs !== null && entry.expiresAtMs <= Date.now() ? null : entry.principal;
}
