import type { UserRecord } from '../../auth/principal';
import type { Queryable, TransactionSql } from '../../infra/postgres';
import { toUser } from '../accounts/store';

export type ConnectorScope = 'read' | 'write';

export interface OAuthClientRow {
  id: string;
  client_name: string;
  redirect_uris: string[];
  client_uri: string | null;
  created_at: Date;
}

export interface AuthorizationCodeRow {
  code_hash: string;
  client_id: string;
  user_id: string;
  redirect_uri: string;
  code_challenge: string;
  project_ids: string[];
  scope: ConnectorScope;
  resource: string | null;
  expires_at: Date;
  used_at: Date | null;
}

export interface ConnectionRow {
  id: string;
  user_id: string;
  client_id: string;
  project_ids: string[];
  scope: ConnectorScope;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface RefreshTokenRow {
  token_hash: string;
  connection_id: string;
  expires_at: Date;
  used_at: Date | null;
}

/** Postgres side of OAuth (migrations/0065_oauth_connections.sql); secrets arrive already hashed. */
export class OAuthStore {
  async insertClient(db: Queryable, client: { id: string; name: string; redirectUris: string[]; clientUri: string | null }): Promise<OAuthClientRow> {
    const [row] = await db<OAuthClientRow[]>`
      INSERT INTO oauth_clients (id, client_name, redirect_uris, client_uri)
      VALUES (${client.id}, ${client.name}, ${client.redirectUris}, ${client.clientUri})
      RETURNING *`;
    return row;
  }

  async findClient(db: Queryable, id: string): Promise<OAuthClientRow | null> {
    const [row] = await db<OAuthClientRow[]>`SELECT * FROM oauth_clients WHERE id = ${id}`;
    return row ?? null;
  }

  /** The user's projects with their role, for the consent choice and its check. */
  async memberProjects(db: Queryable, userId: string): Promise<{ id: string; name: string; role: string }[]> {
    return db<{ id: string; name: string; role: string }[]>`
      SELECT p.id, p.name, m.role FROM project_members m JOIN projects p ON p.id = m.project_id
      WHERE m.user_id = ${userId} ORDER BY p.name, p.id`;
  }

  async insertCode(db: Queryable, code: Omit<AuthorizationCodeRow, 'used_at'>): Promise<void> {
    await db`
      INSERT INTO oauth_authorization_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, project_ids, scope, resource, expires_at)
      VALUES (${code.code_hash}, ${code.client_id}, ${code.user_id}, ${code.redirect_uri}, ${code.code_challenge}, ${code.project_ids}, ${code.scope}, ${code.resource}, ${code.expires_at})`;
    // Codes live 60 s: old ones are dropped as new ones are made.
    await db`DELETE FROM oauth_authorization_codes WHERE expires_at < now() - interval '1 hour'`;
  }

  /** Marks the code used: only the first caller gets the row (single use even under a race). */
  async consumeCode(db: Queryable, codeHash: string): Promise<AuthorizationCodeRow | null> {
    const [row] = await db<AuthorizationCodeRow[]>`
      UPDATE oauth_authorization_codes SET used_at = now()
      WHERE code_hash = ${codeHash} AND used_at IS NULL RETURNING *`;
    return row ?? null;
  }

  async insertConnection(tx: TransactionSql, c: { id: string; userId: string; clientId: string; projectIds: string[]; scope: ConnectorScope }): Promise<void> {
    await tx`
      INSERT INTO oauth_connections (id, user_id, client_id, project_ids, scope)
      VALUES (${c.id}, ${c.userId}, ${c.clientId}, ${c.projectIds}, ${c.scope})`;
  }

  async insertTokenPair(
    tx: TransactionSql,
    pair: { connectionId: string; accessId: string; accessHash: string; accessExpiresAt: Date; refreshHash: string; refreshExpiresAt: Date },
  ): Promise<void> {
    await tx`
      INSERT INTO oauth_access_tokens (token_hash, id, connection_id, expires_at)
      VALUES (${pair.accessHash}, ${pair.accessId}, ${pair.connectionId}, ${pair.accessExpiresAt})`;
    await tx`
      INSERT INTO oauth_refresh_tokens (token_hash, connection_id, expires_at)
      VALUES (${pair.refreshHash}, ${pair.connectionId}, ${pair.refreshExpiresAt})`;
    // Expired tokens of the connection are dead weight; spent refresh tokens stay until they
    // expire, since presenting one again must still be recognised as reuse.
    await tx`DELETE FROM oauth_access_tokens WHERE connection_id = ${pair.connectionId} AND expires_at < now()`;
    await tx`DELETE FROM oauth_refresh_tokens WHERE connection_id = ${pair.connectionId} AND expires_at < now()`;
  }

  async lockRefreshToken(tx: TransactionSql, tokenHash: string): Promise<(RefreshTokenRow & { client_id: string; scope: ConnectorScope; revoked_at: Date | null }) | null> {
    const [row] = await tx<(RefreshTokenRow & { client_id: string; scope: ConnectorScope; revoked_at: Date | null })[]>`
      SELECT r.*, c.client_id, c.scope, c.revoked_at FROM oauth_refresh_tokens r
      JOIN oauth_connections c ON c.id = r.connection_id
      WHERE r.token_hash = ${tokenHash} FOR UPDATE OF r, c`;
    return row ?? null;
  }

  async markRefreshUsed(tx: TransactionSql, tokenHash: string): Promise<void> {
    await tx`UPDATE oauth_refresh_tokens SET used_at = now() WHERE token_hash = ${tokenHash}`;
  }

  async revokeConnection(db: Queryable, connectionId: string, userId?: string): Promise<boolean> {
    const rows = userId
      ? await db`UPDATE oauth_connections SET revoked_at = now() WHERE id = ${connectionId} AND user_id = ${userId} AND revoked_at IS NULL RETURNING id`
      : await db`UPDATE oauth_connections SET revoked_at = now() WHERE id = ${connectionId} AND revoked_at IS NULL RETURNING id`;
    return rows.length > 0;
  }

  /** The connection an access or refresh token (by hash) was issued under, with its client. */
  async connectionOfToken(db: Queryable, tokenHash: string): Promise<{ id: string; client_id: string } | null> {
    const [row] = await db<{ id: string; client_id: string }[]>`
      SELECT c.id, c.client_id FROM oauth_connections c
      WHERE c.id IN (SELECT connection_id FROM oauth_access_tokens WHERE token_hash = ${tokenHash}
                     UNION ALL SELECT connection_id FROM oauth_refresh_tokens WHERE token_hash = ${tokenHash})`;
    return row ?? null;
  }

  async listConnections(db: Queryable, userId: string): Promise<(ConnectionRow & { client_name: string })[]> {
    return db<(ConnectionRow & { client_name: string })[]>`
      SELECT c.*, k.client_name FROM oauth_connections c JOIN oauth_clients k ON k.id = c.client_id
      WHERE c.user_id = ${userId} AND c.revoked_at IS NULL ORDER BY c.created_at DESC, c.id`;
  }

  /** A live access token with its connection and user; null when unknown, expired or revoked. */
  async findLiveAccessToken(db: Queryable, tokenHash: string): Promise<{ tokenId: string; connection: ConnectionRow; user: UserRecord } | null> {
    const [row] = await db<(ConnectionRow & { token_id: string; u_email: string; u_name: string; u_email_verified: boolean; u_created_at: Date })[]>`
      SELECT c.*, t.id AS token_id, u.email AS u_email, u.name AS u_name, u.email_verified AS u_email_verified, u.created_at AS u_created_at
      FROM oauth_access_tokens t
      JOIN oauth_connections c ON c.id = t.connection_id
      JOIN users u ON u.id = c.user_id
      WHERE t.token_hash = ${tokenHash} AND t.expires_at > now() AND c.revoked_at IS NULL`;
    if (!row) return null;
    const user = toUser({ id: row.user_id, email: row.u_email, name: row.u_name, email_verified: row.u_email_verified, created_at: row.u_created_at });
    return { tokenId: row.token_id, connection: row, user };
  }

  /** Records use at most once a minute per connection. */
  async touchConnection(db: Queryable, id: string): Promise<void> {
    await db`
      UPDATE oauth_connections SET last_used_at = now()
      WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`;
  }
}
