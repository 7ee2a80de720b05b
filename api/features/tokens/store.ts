import type { TokenScope } from '../../auth/principal';
import type { TokenBinding } from '../../domain/token-binding';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import type { RevokedJti } from './revocation';
import type { ProjectTokenRow } from './types';

export interface IssuedJwt {
  jti: string;
  kind: 'access' | 'refresh';
  expiresAt: Date;
}

/** Project tokens and the JWTs issued for them, in Postgres. */
export class ProjectTokenStore {
  async insert(
    db: Queryable,
    t: { id: string; projectId: string; name: string; tokenType: 'opaque' | 'jwt'; secretHash: string | null; scopes: TokenScope[]; expiresAt: Date | null; createdBy: string | null; scope: TokenBinding | null },
  ): Promise<ProjectTokenRow> {
    const [row] = await db<ProjectTokenRow[]>`
      INSERT INTO project_tokens (id, project_id, name, token_type, secret_hash, scopes, expires_at, created_by, scope_service_id, scope_environment)
      VALUES (${t.id}, ${t.projectId}, ${t.name}, ${t.tokenType}, ${t.secretHash}, ${db.json(t.scopes)}, ${t.expiresAt}, ${t.createdBy},
        ${t.scope?.serviceId ?? null}, ${t.scope?.environment ?? null})
      RETURNING *`;
    return row;
  }

  async insertJwts(db: Queryable, tokenId: string, jwts: IssuedJwt[]): Promise<void> {
    for (const j of jwts) {
      await db`INSERT INTO project_token_jwts (jti, token_id, kind, expires_at) VALUES (${j.jti}, ${tokenId}, ${j.kind}, ${j.expiresAt})`;
    }
  }

  /** The project a service belongs to, or null when there is no such service. */
  async serviceProject(db: Queryable, serviceId: string): Promise<string | null> {
    const [row] = await db<{ project_id: string }[]>`SELECT project_id FROM services WHERE id = ${serviceId}`;
    return row?.project_id ?? null;
  }

  async listActive(db: Queryable, projectId: string): Promise<ProjectTokenRow[]> {
    return db<ProjectTokenRow[]>`
      SELECT * FROM project_tokens WHERE project_id = ${projectId} AND revoked_at IS NULL ORDER BY created_at DESC, id DESC`;
  }

  /** Live tokens a user created, limited to projects they are still a member of. */
  async listCreatedBy(db: Queryable, userId: string): Promise<ProjectTokenRow[]> {
    return db<ProjectTokenRow[]>`
      SELECT t.* FROM project_tokens t
      JOIN project_members m ON m.project_id = t.project_id AND m.user_id = ${userId}
      WHERE t.created_by = ${userId} AND t.revoked_at IS NULL
      ORDER BY t.created_at DESC, t.id DESC`;
  }

  async findActiveBySecretHash(db: Queryable, secretHash: string): Promise<ProjectTokenRow | null> {
    const [row] = await db<ProjectTokenRow[]>`
      SELECT * FROM project_tokens WHERE secret_hash = ${secretHash} AND revoked_at IS NULL`;
    return row ?? null;
  }

  async findFamily(
    db: Queryable,
    tokenId: string,
  ): Promise<Pick<ProjectTokenRow, 'id' | 'created_by' | 'revoked_at' | 'scope_service_id' | 'scope_environment'> | null> {
    const [row] = await db<ProjectTokenRow[]>`
      SELECT id, created_by, revoked_at, scope_service_id, scope_environment FROM project_tokens WHERE id = ${tokenId}`;
    return row ?? null;
  }

  async lockForRefresh(tx: TransactionSql, tokenId: string, projectId: string): Promise<ProjectTokenRow | null> {
    const [row] = await tx<ProjectTokenRow[]>`
      SELECT * FROM project_tokens WHERE id = ${tokenId} AND project_id = ${projectId} AND token_type = 'jwt' FOR UPDATE`;
    return row ?? null;
  }

  async lockJwt(tx: TransactionSql, jti: string, tokenId: string) {
    const [row] = await tx<{ kind: string; consumed_at: Date | null; revoked_at: Date | null }[]>`
      SELECT kind, consumed_at, revoked_at FROM project_token_jwts WHERE jti = ${jti} AND token_id = ${tokenId} FOR UPDATE`;
    return row ?? null;
  }

  async consumeJwt(tx: TransactionSql, jti: string): Promise<void> {
    await tx`UPDATE project_token_jwts SET consumed_at = now() WHERE jti = ${jti}`;
  }

  async setExpiry(tx: TransactionSql, tokenId: string, expiresAt: Date): Promise<void> {
    await tx`UPDATE project_tokens SET expires_at = ${expiresAt} WHERE id = ${tokenId}`;
  }

  /** Marks the token revoked; null when it is not a live token of this project. */
  async markRevoked(tx: TransactionSql, projectId: string, tokenId: string, reason: string): Promise<ProjectTokenRow | null> {
    const [row] = await tx<ProjectTokenRow[]>`
      UPDATE project_tokens SET revoked_at = now(), revoked_reason = ${reason}
      WHERE id = ${tokenId} AND project_id = ${projectId} AND revoked_at IS NULL
      RETURNING *`;
    return row ?? null;
  }

  /** Puts every still-valid JWT of the family on the durable revocation list. */
  async revokeFamilyJwts(tx: TransactionSql, tokenId: string): Promise<RevokedJti[]> {
    const rows = await tx<{ jti: string; expires_at: Date }[]>`
      UPDATE project_token_jwts SET revoked_at = now()
      WHERE token_id = ${tokenId} AND revoked_at IS NULL AND expires_at > now()
      RETURNING jti, expires_at`;
    return rows.map((r) => ({ jti: r.jti, expiresAt: r.expires_at }));
  }

  /** Records use at most once a minute per token, so hot paths do not write on every request. */
  async touch(db: Queryable, tokenId: string): Promise<void> {
    await db`
      UPDATE project_tokens SET last_used_at = now()
      WHERE id = ${tokenId} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`;
  }
}
