import type { TestApp, TestUser } from '../support/harness';

type OAuth = typeof import('oauth4webapi', { with: { 'resolution-mode': 'import' } });
export const loadOAuth = (): Promise<OAuth> => import('oauth4webapi');

export const REDIRECT_URI = 'http://127.0.0.1:53682/callback';

/** An MCP client as oauth4webapi sees it: the discovered server, the registered client, its options. */
export interface OAuthClient {
  oauth: OAuth;
  as: Awaited<ReturnType<OAuth['processDiscoveryResponse']>>;
  client: { client_id: string; token_endpoint_auth_method: 'none' };
  /** Plain http is fine against the test server. */
  options: Record<symbol, boolean>;
  resource: string;
}

/** Discovers the server from the MCP resource (RFC 9728, then RFC 8414) and registers a client (RFC 7591). */
export async function registerClient(app: TestApp, redirectUris = [REDIRECT_URI]): Promise<OAuthClient> {
  const oauth = await loadOAuth();
  const options = { [oauth.allowInsecureRequests]: true };
  const resource = `${app.urls.control}/mcp`;
  const rs = await oauth.processResourceDiscoveryResponse(new URL(resource), await oauth.resourceDiscoveryRequest(new URL(resource), options));
  const issuer = new URL(rs.authorization_servers![0]);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...options }));
  const registered = await oauth.processDynamicClientRegistrationResponse(
    await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: redirectUris, client_name: 'Test assistant', token_endpoint_auth_method: 'none' }, options),
  );
  return { oauth, as, client: { client_id: registered.client_id, token_endpoint_auth_method: 'none' }, options, resource };
}

export interface AuthorizationAttempt {
  /** The query string of the authorization request (what the consent page and API receive). */
  query: string;
  verifier: string;
  state: string;
}

export async function authorizationRequest(c: OAuthClient, extra: Record<string, string> = {}): Promise<AuthorizationAttempt> {
  const verifier = c.oauth.generateRandomCodeVerifier();
  const state = c.oauth.generateRandomState();
  const params = new URLSearchParams({
    response_type: 'code',
    client_id: c.client.client_id,
    redirect_uri: REDIRECT_URI,
    code_challenge: await c.oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    scope: 'read',
    resource: c.resource,
    ...extra,
  });
  return { query: params.toString(), verifier, state };
}

/** The consent page's POST: the request's fields, the chosen projects, approve. */
export function consentBody(attempt: AuthorizationAttempt, projectIds: string[], approve = true) {
  return { ...Object.fromEntries(new URLSearchParams(attempt.query)), projectIds, approve };
}

export interface Connection {
  accessToken: string;
  refreshToken: string;
  client: OAuthClient;
}

/** The whole flow as a user goes through it: discovery, registration, consent with the session, code exchange with PKCE. */
export async function connect(app: TestApp, user: TestUser, projectIds: string[], scope: 'read' | 'write' = 'read', existing?: OAuthClient): Promise<Connection> {
  const c = existing ?? (await registerClient(app));
  const attempt = await authorizationRequest(c, { scope });
  const consent = await approveInBrowser(user, new URL(`${c.as.authorization_endpoint}?${attempt.query}`), projectIds);
  if (consent.status !== 200) throw new Error(`consent failed: ${consent.status} ${consent.text}`);
  const tokens = await exchange(c, attempt, consent.body.redirectUrl);
  return { accessToken: tokens.access_token, refreshToken: tokens.refresh_token!, client: c };
}

/**
 * What the consent page does in the user's browser: open the authorization URL (the page), read
 * the consent API, post the choice with the session's CSRF token. Answers the POST's response.
 */
export async function approveInBrowser(user: TestUser, authorizationUrl: URL, projectIds: string[]) {
  const path = `${authorizationUrl.pathname}${authorizationUrl.search}`;
  const page = await user.request('GET', path);
  if (page.status !== 200 || !page.text.includes(user.csrf)) throw new Error(`consent page: ${page.status} ${page.text.slice(0, 200)}`);
  const shown = await user.request('GET', `/api/oauth/consent${authorizationUrl.search}`);
  if (shown.status !== 200) throw new Error(`consent API: ${shown.status} ${shown.text}`);
  return user.request('POST', '/api/oauth/consent', { ...Object.fromEntries(authorizationUrl.searchParams), projectIds, approve: true });
}

export async function exchange(c: OAuthClient, attempt: AuthorizationAttempt, redirectUrl: string) {
  const params = c.oauth.validateAuthResponse(c.as, c.client, new URL(redirectUrl), attempt.state);
  const response = await c.oauth.authorizationCodeGrantRequest(c.as, c.client, c.oauth.None(), params, REDIRECT_URI, attempt.verifier, c.options);
  return c.oauth.processAuthorizationCodeResponse(c.as, c.client, response);
}

/** POSTs a raw form to the token endpoint (what a misbehaving client sends). */
export async function tokenRequest(app: TestApp, form: Record<string, string>) {
  const res = await fetch(`${app.urls.control}/api/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}
