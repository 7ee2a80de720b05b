import { createHash, randomBytes } from 'node:crypto';
import { InvalidGrantError, InvalidRequestError, InvalidScopeError, UnsupportedGrantTypeError, UnsupportedResponseTypeError, type OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthClientInformationFull, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { z } from 'zod';
import type { PersonalTokenPrincipal, UserRecord } from '../../auth/principal';
import { badRequest, notFound } from '../../http/errors';
import { newId, sha256Hex } from '../../infra/ids';
import type { Logger } from '../../infra/logger';
import type { Sql, TransactionSql } from '../../infra/postgres';
import { text } from '../projects/common';
import type { ConnectorScope, OAuthClientRow, OAuthStore } from './store';

export const CONNECTOR_TOKEN_PREFIX = 'mcp_';
const CONNECTOR_TOKEN_PATTERN = /^mcp_[0-9a-f]{64}$/;
/** Refresh tokens have their own prefix: they are never accepted as a bearer credential. */
const REFRESH_TOKEN_PREFIX = 'mcpr_';

export const CODE_TTL_MS = 60_000;
export const ACCESS_TOKEN_TTL_SECONDS = 3600;
const REFRESH_TOKEN_TTL_MS = 30 * 24 * 3600_000;
export const MAX_REDIRECT_URIS = 10;
export const MAX_CONSENT_PROJECTS = 100;

/** The fields of an authorization request (RFC 6749 4.1.1 with PKCE, RFC 7636; RFC 8707 resource). */
export const authorizationRequestSchema = z.object({
  response_type: text(50),
  client_id: text(128),
  redirect_uri: text(2000),
  code_challenge: text(128).optional(),
  code_challenge_method: text(20).optional(),
  state: text(1000).optional(),
  scope: text(200).optional(),
  resource: text(2000).optional(),
});
export type AuthorizationRequest = z.infer<typeof authorizationRequestSchema>;

/** A request whose client and redirect_uri are known good: errors can now go back to the client. */
export interface CheckedAuthorization {
  client: OAuthClientRow;
  redirectUri: string;
  state?: string;
  codeChallenge: string;
  scope: ConnectorScope;
  resource: string | null;
}

/** Where the client must not be redirected (unknown client, unregistered redirect_uri): shown to the user instead. */
export class UntrustedRedirectError extends Error {}

/** An error to hand back to the client on its redirect_uri (RFC 6749 4.1.2.1). */
export class RedirectableError extends Error {
  constructor(
    readonly error: OAuthError,
    readonly redirectUri: string,
    readonly state: string | undefined,
  ) {
    super(error.message);
  }
}

/** The token endpoint's request body (RFC 6749 4.1.3 and 6, PKCE code_verifier). */
const tokenRequestSchema = z.object({
  grant_type: text(100),
  client_id: text(128).optional(),
  code: text(200).optional(),
  code_verifier: text(200).optional(),
  redirect_uri: text(2000).optional(),
  refresh_token: text(200).optional(),
  resource: text(2000).optional(),
});

const VERIFIER_PATTERN = /^[A-Za-z0-9._~-]{43,128}$/;
const CHALLENGE_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export interface OAuthServiceDeps {
  sql: Sql;
  store: OAuthStore;
  logger: Logger;
}

/**
 * OAuth 2.1 authorization server for MCP clients (docs/api-reference.md#oauth-and-mcp): public
 * clients registered dynamically, authorization code with PKCE S256 only, refresh with rotation and
 * reuse detection. Each consent is a connection; its connector tokens act as the user on the
 * consented projects only (api/auth/access.ts decides).
 */
export class OAuthService {
  constructor(private readonly deps: OAuthServiceDeps) {}

  /** RFC 7591: public clients only (token_endpoint_auth_method none); redirect URIs https or loopback http. */
  async register(raw: unknown): Promise<OAuthClientInformationFull> {
    // Loaded on first use: the SDK's auth schemas bring a zod of their own (about 3 MB of heap),
    // which processes that never register a client should not hold.
    const { OAuthClientMetadataSchema } = await import('@modelcontextprotocol/sdk/shared/auth.js');
    const parsed = OAuthClientMetadataSchema.safeParse(raw);
    if (!parsed.success) throw new ClientMetadataError('invalid_client_metadata', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const metadata = parsed.data;
    if (metadata.token_endpoint_auth_method !== undefined && metadata.token_endpoint_auth_method !== 'none') {
      throw new ClientMetadataError('invalid_client_metadata', 'only public clients are supported: token_endpoint_auth_method must be "none"');
    }
    if (metadata.redirect_uris.length < 1 || metadata.redirect_uris.length > MAX_REDIRECT_URIS) {
      throw new ClientMetadataError('invalid_redirect_uri', `between 1 and ${MAX_REDIRECT_URIS} redirect_uris are required`);
    }
    for (const uri of metadata.redirect_uris) {
      const problem = redirectUriProblem(uri);
      if (problem) throw new ClientMetadataError('invalid_redirect_uri', `${uri}: ${problem}`);
    }
    for (const [field, values, allowed] of [
      ['grant_types', metadata.grant_types, ['authorization_code', 'refresh_token']],
      ['response_types', metadata.response_types, ['code']],
    ] as const) {
      const unsupported = values?.find((v) => !(allowed as readonly string[]).includes(v));
      if (unsupported) throw new ClientMetadataError('invalid_client_metadata', `${field}: "${unsupported}" is not supported`);
    }
    // Postgres text cannot hold NUL: refused here rather than failing the insert.
    if ([metadata.client_name, metadata.client_uri, ...metadata.redirect_uris].some((v) => v?.includes('\u0000'))) {
      throw new ClientMetadataError('invalid_client_metadata', 'values must not contain NUL characters');
    }
    const name = (metadata.client_name ?? '').trim().slice(0, 200) || 'Unnamed MCP client';
    const clientUri = metadata.client_uri && metadata.client_uri.length <= 2000 ? metadata.client_uri : null;
    const row = await this.deps.store.insertClient(this.deps.sql, { id: newId('mcc'), name, redirectUris: metadata.redirect_uris, clientUri });
    return {
      client_id: row.id,
      client_id_issued_at: Math.floor(row.created_at.getTime() / 1000),
      client_name: row.client_name,
      ...(row.client_uri ? { client_uri: row.client_uri } : {}),
      redirect_uris: row.redirect_uris,
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      scope: 'read write',
    };
  }

  /**
   * Validates an authorization request. Unknown client or a redirect_uri not registered exactly
   * throw UntrustedRedirectError (never redirect there); anything else wrong is a RedirectableError.
   */
  async checkAuthorization(request: AuthorizationRequest, resourceUrl: string): Promise<CheckedAuthorization> {
    const client = await this.deps.store.findClient(this.deps.sql, request.client_id);
    if (!client) throw new UntrustedRedirectError('unknown client_id');
    if (!client.redirect_uris.includes(request.redirect_uri)) throw new UntrustedRedirectError('redirect_uri is not registered for this client');
    const back = (error: OAuthError) => new RedirectableError(error, request.redirect_uri, request.state);
    if (request.response_type !== 'code') throw back(new UnsupportedResponseTypeError('response_type must be "code"'));
    if (request.code_challenge_method !== 'S256') throw back(new InvalidRequestError('PKCE with code_challenge_method=S256 is required; "plain" is refused'));
    if (!request.code_challenge || !CHALLENGE_PATTERN.test(request.code_challenge)) throw back(new InvalidRequestError('code_challenge must be the base64url SHA-256 of the code verifier'));
    if (request.resource !== undefined && request.resource !== resourceUrl) throw back(new InvalidRequestError(`resource must be ${resourceUrl}`));
    const scope = parseScope(request.scope);
    if (!scope) throw back(new InvalidScopeError('scope must be "read" or "write"'));
    return { client, redirectUri: request.redirect_uri, state: request.state, codeChallenge: request.code_challenge, scope, resource: request.resource ?? null };
  }

  /** GET /api/oauth/consent: what the consent page shows. */
  async describeConsent(user: UserRecord, checked: CheckedAuthorization) {
    const projects = await this.deps.store.memberProjects(this.deps.sql, user.id);
    return {
      client: { id: checked.client.id, name: checked.client.client_name, uri: checked.client.client_uri, redirectUri: checked.redirectUri },
      scopes: checked.scope === 'write' ? ['read', 'write'] : ['read'],
      projects,
    };
  }

  /** POST /api/oauth/consent: the client's redirect with a code (approve) or access_denied. */
  async decideConsent(user: UserRecord, checked: CheckedAuthorization, projectIds: string[], approve: boolean, issuer: string): Promise<string> {
    if (!approve) return redirectWith(checked.redirectUri, { error: 'access_denied', error_description: 'the user denied access', state: checked.state, iss: issuer });
    const member = new Set((await this.deps.store.memberProjects(this.deps.sql, user.id)).map((p) => p.id));
    const chosen = [...new Set(projectIds)];
    const foreign = chosen.filter((id) => !member.has(id));
    if (foreign.length) throw badRequest('projectIds must be projects you are a member of', foreign.map((id) => ({ path: 'body.projectIds', message: `not a project of yours: ${id}` })));
    const code = randomBytes(32).toString('base64url');
    await this.deps.store.insertCode(this.deps.sql, {
      code_hash: sha256Hex(code),
      client_id: checked.client.id,
      user_id: user.id,
      redirect_uri: checked.redirectUri,
      code_challenge: checked.codeChallenge,
      project_ids: chosen,
      scope: checked.scope,
      resource: checked.resource,
      expires_at: new Date(Date.now() + CODE_TTL_MS),
    });
    return redirectWith(checked.redirectUri, { code, state: checked.state, iss: issuer });
  }

  /** POST /api/oauth/token; OAuthError subclasses are answered as RFC 6749 5.2 errors. */
  async token(raw: unknown): Promise<OAuthTokens> {
    const parsed = tokenRequestSchema.safeParse(raw);
    if (!parsed.success) throw new InvalidRequestError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const request = parsed.data;
    if (request.grant_type === 'authorization_code') return this.exchangeCode(request);
    if (request.grant_type === 'refresh_token') return this.refresh(request);
    throw new UnsupportedGrantTypeError('grant_type must be authorization_code or refresh_token');
  }

  private async exchangeCode(request: z.infer<typeof tokenRequestSchema>): Promise<OAuthTokens> {
    if (!request.code || !request.code_verifier || !request.redirect_uri || !request.client_id) {
      throw new InvalidRequestError('code, code_verifier, redirect_uri and client_id are required');
    }
    if (!VERIFIER_PATTERN.test(request.code_verifier)) throw new InvalidGrantError('code_verifier must be 43 to 128 unreserved characters');
    const { code_verifier: verifier, redirect_uri: redirectUri, client_id: clientId } = request;
    // Consumed in its own statement: a failed exchange spends the code too (single use).
    const code = await this.deps.store.consumeCode(this.deps.sql, sha256Hex(request.code));
    if (!code) throw new InvalidGrantError('the authorization code is unknown or was already used');
    if (code.expires_at.getTime() <= Date.now()) throw new InvalidGrantError('the authorization code has expired');
    if (code.client_id !== clientId) throw new InvalidGrantError('the authorization code was issued to another client');
    if (code.redirect_uri !== redirectUri) throw new InvalidGrantError('redirect_uri differs from the authorization request');
    if (s256(verifier) !== code.code_challenge) throw new InvalidGrantError('code_verifier does not match the code_challenge');
    return this.deps.sql.begin(async (tx) => {
      const connectionId = newId('mcn');
      await this.deps.store.insertConnection(tx, { id: connectionId, userId: code.user_id, clientId, projectIds: code.project_ids, scope: code.scope });
      return this.issuePair(tx, connectionId, code.scope);
    }) as Promise<OAuthTokens>;
  }

  /** Rotation: the presented refresh token is spent; presenting a spent one revokes the whole connection. */
  private async refresh(request: z.infer<typeof tokenRequestSchema>): Promise<OAuthTokens> {
    if (!request.refresh_token || !request.client_id) throw new InvalidRequestError('refresh_token and client_id are required');
    const { refresh_token: refreshToken, client_id: clientId } = request;
    const outcome = await this.deps.sql.begin(async (tx) => {
      const row = await this.deps.store.lockRefreshToken(tx, sha256Hex(refreshToken));
      if (!row || row.client_id !== clientId) return { error: new InvalidGrantError('the refresh token is unknown') };
      if (row.revoked_at) return { error: new InvalidGrantError('the connection was revoked') };
      if (row.used_at) {
        await this.deps.store.revokeConnection(tx, row.connection_id);
        return { error: new InvalidGrantError('the refresh token was already used; the connection is revoked'), reused: row.connection_id };
      }
      if (row.expires_at.getTime() <= Date.now()) return { error: new InvalidGrantError('the refresh token has expired') };
      await this.deps.store.markRefreshUsed(tx, row.token_hash);
      return { tokens: await this.issuePair(tx, row.connection_id, row.scope) };
    });
    if ('tokens' in outcome && outcome.tokens) return outcome.tokens;
    if ('reused' in outcome) this.deps.logger.warn({ connectionId: outcome.reused }, 'refresh token reused: connection revoked');
    throw (outcome as { error: OAuthError }).error;
  }

  private async issuePair(tx: TransactionSql, connectionId: string, scope: ConnectorScope): Promise<OAuthTokens> {
    const access = CONNECTOR_TOKEN_PREFIX + randomBytes(32).toString('hex');
    const refresh = REFRESH_TOKEN_PREFIX + randomBytes(32).toString('hex');
    await this.deps.store.insertTokenPair(tx, {
      connectionId,
      accessId: newId('mct'),
      accessHash: sha256Hex(access),
      accessExpiresAt: new Date(Date.now() + ACCESS_TOKEN_TTL_SECONDS * 1000),
      refreshHash: sha256Hex(refresh),
      refreshExpiresAt: new Date(Date.now() + REFRESH_TOKEN_TTL_MS),
    });
    return { access_token: access, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_SECONDS, refresh_token: refresh, scope };
  }

  /**
   * RFC 7009 revocation by the client: either token ends its whole connection (the client is
   * disconnecting). Unknown tokens and other clients' tokens change nothing and are not reported.
   */
  async revoke(raw: unknown): Promise<void> {
    const parsed = z.object({ token: text(200), client_id: text(128), token_type_hint: text(50).optional() }).safeParse(raw);
    if (!parsed.success) throw new InvalidRequestError('token and client_id are required');
    const connection = await this.deps.store.connectionOfToken(this.deps.sql, sha256Hex(parsed.data.token));
    if (connection && connection.client_id === parsed.data.client_id) await this.deps.store.revokeConnection(this.deps.sql, connection.id);
  }

  /**
   * Bearer resolution for `mcp_` tokens. Not memoised: a revoked connection or a user removed
   * from a project must stop working at once, and connector traffic is light.
   */
  async resolve(secret: string): Promise<PersonalTokenPrincipal | null> {
    if (!CONNECTOR_TOKEN_PATTERN.test(secret)) return null;
    const found = await this.deps.store.findLiveAccessToken(this.deps.sql, sha256Hex(secret));
    if (!found) return null;
    this.deps.store.touchConnection(this.deps.sql, found.connection.id).catch((error) => this.deps.logger.warn({ err: error }, 'could not record connection use'));
    return {
      type: 'personal_access_token',
      tokenId: found.tokenId,
      user: found.user,
      tier: found.connection.scope,
      allowOwnerActions: false,
      connection: { id: found.connection.id, projectIds: found.connection.project_ids },
    };
  }

  async listConnections(user: UserRecord) {
    return (await this.deps.store.listConnections(this.deps.sql, user.id)).map((c) => ({
      id: c.id,
      client: { id: c.client_id, name: c.client_name },
      projectIds: c.project_ids,
      scope: c.scope,
      createdAt: c.created_at.toISOString(),
      lastUsedAt: c.last_used_at?.toISOString() ?? null,
    }));
  }

  async revokeConnection(user: UserRecord, id: string): Promise<void> {
    if (!(await this.deps.store.revokeConnection(this.deps.sql, id, user.id))) throw notFound('Connection');
  }
}

/** RFC 7591 3.2.2 errors (invalid_redirect_uri, invalid_client_metadata). */
export class ClientMetadataError extends Error {
  constructor(
    readonly error: 'invalid_redirect_uri' | 'invalid_client_metadata',
    readonly description: string,
  ) {
    super(description);
  }
}

/** MCP authorization: redirect URIs are https, or http on a loopback host (native clients). */
function redirectUriProblem(uri: string): string | null {
  if (uri.length > 2000) return 'longer than 2000 characters';
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'not a URL';
  }
  if (url.hash) return 'must not contain a fragment';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)) return null;
  return 'must be https, or http on localhost, 127.0.0.1 or [::1]';
}

/** The connection's scope: `write` when asked for, `read` otherwise (least privilege); null when unknown words are asked. */
function parseScope(scope: string | undefined): ConnectorScope | null {
  const words = (scope ?? '').split(' ').filter(Boolean);
  if (words.some((w) => w !== 'read' && w !== 'write')) return null;
  return words.includes('write') ? 'write' : 'read';
}

const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [key, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(key, value);
  return url.toString();
}
