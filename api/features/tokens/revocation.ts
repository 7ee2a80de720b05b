import type { Cache } from '../../infra/cache';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';

const revokedKey = (jti: string) => `jwt:revoked:${jti}`;
/** Present while the Redis mirror holds every durable revocation; gone after a flush or restart. */
const MIRROR_COMPLETE_KEY = 'jwt:revocations-mirrored';
/** Entries outlive the token a little, so clock skew between replicas cannot reopen it. */
const TTL_MARGIN_SECONDS = 60;

export interface RevokedJti {
  jti: string;
  expiresAt: Date;
}

/**
 * The JWT revocation list (docs/api-reference.md#project-api-tokens), checked on every request.
 * Postgres (`project_token_jwts.revoked_at`) is the durable truth; the shared cache mirrors it with
 * a TTL until each token's original expiry so the check costs one pipelined cache round trip. A
 * marker key says the mirror is complete: when Redis loses its data the marker goes with it and the
 * next check rebuilds the mirror from Postgres before answering, so a flush or restart never
 * reopens a revoked token. If the cache itself fails, Postgres answers.
 */
export class JwtRevocationList {
  private rebuilding?: Promise<void>;

  constructor(private readonly deps: { sql: Sql; cache: Cache; logger: Logger }) {}

  async isRevoked(jti: string): Promise<boolean> {
    try {
      const [revoked, complete] = await Promise.all([this.deps.cache.get(revokedKey(jti)), this.deps.cache.get(MIRROR_COMPLETE_KEY)]);
      if (revoked !== null) return true;
      if (complete !== null) return false;
      await this.rebuild();
      return (await this.deps.cache.get(revokedKey(jti))) !== null;
    } catch (error) {
      this.deps.logger.warn({ err: error }, 'revocation mirror unavailable; asking Postgres');
      return this.isRevokedDurably(jti);
    }
  }

  async isRevokedDurably(jti: string): Promise<boolean> {
    const [row] = await this.deps.sql`
      SELECT 1 FROM project_token_jwts WHERE jti = ${jti} AND revoked_at IS NOT NULL AND expires_at > now()`;
    return Boolean(row);
  }

  /** Mirrors jtis already revoked in Postgres (call after the revoking transaction commits). */
  async publish(entries: RevokedJti[]): Promise<void> {
    try {
      await Promise.all(entries.map((e) => this.deps.cache.set(revokedKey(e.jti), '1', ttlSeconds(e.expiresAt))));
    } catch (error) {
      // Dropping the marker forces every replica to rebuild from Postgres on its next check.
      this.deps.logger.error({ err: error }, 'could not mirror revoked JWTs; forcing a rebuild');
      await this.deps.cache.del(MIRROR_COMPLETE_KEY).catch(() => undefined);
    }
  }

  /** Reloads every live revocation from Postgres into the cache (one at a time per process). */
  rebuild(): Promise<void> {
    this.rebuilding ??= (async () => {
      try {
        const rows = await this.deps.sql<{ jti: string; expires_at: Date }[]>`
          SELECT jti, expires_at FROM project_token_jwts WHERE revoked_at IS NOT NULL AND expires_at > now()`;
        await Promise.all(rows.map((r) => this.deps.cache.set(revokedKey(r.jti), '1', ttlSeconds(r.expires_at))));
        await this.deps.cache.set(MIRROR_COMPLETE_KEY, new Date().toISOString());
        this.deps.logger.info({ entries: rows.length }, 'JWT revocation mirror rebuilt from Postgres');
      } finally {
        this.rebuilding = undefined;
      }
    })();
    return this.rebuilding;
  }

  /** Issued-token rows past their expiry need no revocation entry any more: the signature check refuses them. */
  async sweepExpired(): Promise<number> {
    const rows = await this.deps.sql`DELETE FROM project_token_jwts WHERE expires_at < now() - interval '1 hour' RETURNING 1`;
    return rows.length;
  }
}

function ttlSeconds(expiresAt: Date): number {
  return Math.max(1, Math.ceil((expiresAt.getTime() - Date.now()) / 1000)) + TTL_MARGIN_SECONDS;
}
