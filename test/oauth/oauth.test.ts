import { startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, opaqueToken, personalToken, type Project } from '../webhooks/support';
import { authorizationRequest, connect, consentBody, exchange, REDIRECT_URI, registerClient, tokenRequest, type OAuthClient } from './support';

/**
 * OAuth 2.1 for MCP clients (docs/api-reference.md#oauth-and-mcp) driven by oauth4webapi over HTTP,
 * and connector tokens in the one gate.
 */

let app: TestApp;
let a: Project;
let b: Project;
let client: OAuthClient;
const flagKey = `mcp-flag-${Date.now().toString(36)}`;

const bearer = (token: string) => ({ token });
const flagRef = (p: Project) => `serviceId=${p.serviceId}&environment=production`;

beforeAll(async () => {
  app = await startTestApp();
  a = await createProject(app);
  b = await createProject(app);
  // The owner of A is also a member of B, so a connection for A only must still not reach B.
  expectStatus(await b.owner.request('POST', `/api/projects/${b.projectId}/members`, { userId: a.owner.id, role: 'member' }), 201, 'add to B');
  await createFlag(a.owner, a.serviceId, flagKey);
  await createFlag(b.owner, b.serviceId, flagKey);
  client = await registerClient(app);
});
afterAll(async () => {
  await app?.stop();
});

describe('metadata and registration', () => {
  it('describes the MCP resource (RFC 9728) and the authorization server (RFC 8414): S256 only, public clients', async () => {
    const rs = await app.request('GET', '/.well-known/oauth-protected-resource/mcp');
    expect(rs.status).toBe(200);
    expect(rs.body).toMatchObject({ resource: `${app.urls.control}/mcp`, authorization_servers: [app.urls.control], scopes_supported: ['read', 'write'] });
    const as = await app.request('GET', '/.well-known/oauth-authorization-server');
    expect(as.status).toBe(200);
    expect(as.body).toMatchObject({
      issuer: app.urls.control,
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      registration_endpoint: `${app.urls.control}/api/oauth/register`,
    });
  });

  it('registers only https or loopback http redirect URIs, a bounded number, public clients', async () => {
    const register = (body: unknown) => app.request('POST', '/api/oauth/register', { body });
    const ok = await register({ redirect_uris: ['https://assistant.example.com/cb', 'http://localhost:8976/cb'], client_name: 'Ok' });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ client_name: 'Ok', token_endpoint_auth_method: 'none' });
    expect(ok.body.client_id).toEqual(expect.any(String));

    expect((await register({ redirect_uris: ['http://evil.example.com/cb'] })).body).toMatchObject({ error: 'invalid_redirect_uri' });
    expect((await register({ redirect_uris: ['javascript:alert(1)'] })).status).toBe(400);
    const many = Array.from({ length: 11 }, (_, i) => `https://a.example.com/${i}`);
    expect((await register({ redirect_uris: many })).body).toMatchObject({ error: 'invalid_redirect_uri' });
    expect((await register({ redirect_uris: ['https://a.example.com/cb'], token_endpoint_auth_method: 'client_secret_basic' })).body).toMatchObject({
      error: 'invalid_client_metadata',
    });
    expect((await register({ client_name: 'no redirect' })).body).toMatchObject({ error: 'invalid_client_metadata' });
    expect((await register({ redirect_uris: ['https://a.example.com/cb'], client_name: 'nul\u0000' })).body).toMatchObject({ error: 'invalid_client_metadata' });
    const huge = await app.request('POST', '/api/oauth/register', { rawBody: JSON.stringify({ redirect_uris: ['https://a.example.com/cb'], client_name: 'x'.repeat(20_000) }), headers: { 'content-type': 'application/json' } });
    expect(huge.status).toBe(413);
  });
});

describe('authorization and consent', () => {
  it('serves the consent page to a signed-in user with a strict CSP, and a sign-in page otherwise', async () => {
    const attempt = await authorizationRequest(client);
    const page = await a.owner.request('GET', `/api/oauth/authorize?${attempt.query}`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'nonce-/);
    expect(page.text).toContain(a.owner.csrf);
    // The page's script at least parses (it runs in the browser, not here).
    const script = /<script nonce="[^"]+">([\s\S]*?)<\/script>/.exec(page.text)![1];
    expect(() => new Function(script)).not.toThrow();
    const anonymous = await app.request('GET', `/api/oauth/authorize?${attempt.query}`);
    expect(anonymous.status).toBe(200);
    expect(anonymous.text).toMatch(/Sign in first/);
    expect(anonymous.text).not.toContain('csrf');
  });

  it('the consent API shows the client, the scopes and the user\'s projects', async () => {
    const attempt = await authorizationRequest(client, { scope: 'write' });
    const res = await a.owner.request('GET', `/api/oauth/consent?${attempt.query}`);
    expect(res.status).toBe(200);
    expect(res.body.client).toMatchObject({ id: client.client.client_id, name: 'Test assistant', redirectUri: REDIRECT_URI });
    expect(res.body.scopes).toEqual(['read', 'write']);
    expect(res.body.projects.map((p: { id: string }) => p.id).sort()).toEqual([a.projectId, b.projectId].sort());
  });

  it('refuses plain PKCE, a missing challenge and an unregistered redirect_uri', async () => {
    const plain = await authorizationRequest(client, { code_challenge_method: 'plain' });
    const redirected = await fetch(`${app.urls.control}/api/oauth/authorize?${plain.query}`, { headers: { cookie: a.owner.cookie }, redirect: 'manual' });
    expect(redirected.status).toBe(302);
    const location = new URL(redirected.headers.get('location')!);
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
    expect(location.searchParams.get('error')).toBe('invalid_request');
    expect(location.searchParams.get('state')).toBe(plain.state);
    expect((await a.owner.request('POST', '/api/oauth/consent', consentBody(plain, [a.projectId]))).status).toBe(400);
    const none = await authorizationRequest(client, { code_challenge_method: '', code_challenge: '' });
    expect((await a.owner.request('GET', `/api/oauth/consent?${none.query}`)).status).toBe(400);

    const elsewhere = await authorizationRequest(client, { redirect_uri: 'http://127.0.0.1:53682/other' });
    const notRedirected = await fetch(`${app.urls.control}/api/oauth/authorize?${elsewhere.query}`, { headers: { cookie: a.owner.cookie }, redirect: 'manual' });
    expect(notRedirected.status).toBe(400);
    expect((await a.owner.request('POST', '/api/oauth/consent', consentBody(elsewhere, [a.projectId]))).status).toBe(400);
    const unknownClient = await authorizationRequest(client, { client_id: 'mcc_unknown' });
    expect((await a.owner.request('GET', `/api/oauth/consent?${unknownClient.query}`)).status).toBe(400);
  });

  it('consent needs a session and its CSRF token: no CSRF, personal, project and connector tokens are refused', async () => {
    const attempt = await authorizationRequest(client);
    const body = consentBody(attempt, [a.projectId]);
    expect((await app.request('POST', '/api/oauth/consent', { body, cookie: a.owner.cookie })).status).toBe(403);
    expect((await app.request('POST', '/api/oauth/consent', { body })).status).toBe(401);
    const pat = await personalToken(a.owner, 'admin');
    expect((await app.request('POST', '/api/oauth/consent', { body, token: pat })).status).toBe(403);
    expect((await app.request('GET', `/api/oauth/consent?${attempt.query}`, { token: pat })).status).toBe(403);
    const project = await opaqueToken(a.owner, a.projectId, { read: true, write: true });
    expect((await app.request('POST', '/api/oauth/consent', { body, token: project })).status).toBe(403);
    const connector = await connect(app, a.owner, [a.projectId], 'write', client);
    expect((await app.request('POST', '/api/oauth/consent', { body, token: connector.accessToken })).status).toBe(403);
  });

  it('refuses malformed and oversized consent and token requests', async () => {
    const malformed = await app.request('POST', '/api/oauth/consent', { rawBody: '{"approve":', headers: { 'content-type': 'application/json' }, cookie: a.owner.cookie, csrf: a.owner.csrf });
    expect(malformed.status).toBe(400);
    const attempt = await authorizationRequest(client);
    const oversized = await a.owner.request('POST', '/api/oauth/consent', { ...consentBody(attempt, [a.projectId]), padding: 'x'.repeat(300_000) });
    expect(oversized.status).toBe(413);
    expect((await a.owner.request('POST', '/api/oauth/consent', { ...consentBody(attempt, [a.projectId]), approve: 'yes' })).status).toBe(400);
    expect((await tokenRequest(app, { grant_type: 'refresh_token', refresh_token: 'x'.repeat(10_000), client_id: 'c' })).status).toBe(413);
  });

  it('refuses projects the user is not a member of, and a denial redirects with access_denied', async () => {
    const outsider = await app.signup({ verified: true });
    const attempt = await authorizationRequest(client);
    expect((await outsider.request('POST', '/api/oauth/consent', consentBody(attempt, [a.projectId]))).status).toBe(400);
    expect((await a.owner.request('POST', '/api/oauth/consent', consentBody(attempt, []))).status).toBe(400);
    const denied = await a.owner.request('POST', '/api/oauth/consent', consentBody(attempt, [], false));
    expect(denied.status).toBe(200);
    const url = new URL(denied.body.redirectUrl);
    expect(url.searchParams.get('error')).toBe('access_denied');
    expect(url.searchParams.get('state')).toBe(attempt.state);
  });
});

describe('tokens', () => {
  it('exchanges a code once, with the right verifier and redirect_uri only', async () => {
    const attempt = await authorizationRequest(client);
    const consent = await a.owner.request('POST', '/api/oauth/consent', consentBody(attempt, [a.projectId]));
    const code = new URL(consent.body.redirectUrl).searchParams.get('code')!;
    const base = { grant_type: 'authorization_code', code, client_id: client.client.client_id, redirect_uri: REDIRECT_URI };
    // A wrong verifier or redirect_uri consumes nothing useful: the code is single use either way.
    const wrongVerifier = await tokenRequest(app, { ...base, code_verifier: 'x'.repeat(43) });
    expect(wrongVerifier).toMatchObject({ status: 400, body: { error: 'invalid_grant', error_description: expect.any(String), message: expect.any(String) } });
    expect((await tokenRequest(app, { ...base, code_verifier: attempt.verifier })).body).toMatchObject({ error: 'invalid_grant' });

    const second = await authorizationRequest(client);
    const consent2 = await a.owner.request('POST', '/api/oauth/consent', consentBody(second, [a.projectId]));
    const code2 = new URL(consent2.body.redirectUrl).searchParams.get('code')!;
    const wrongRedirect = await tokenRequest(app, { ...base, code: code2, code_verifier: second.verifier, redirect_uri: 'http://127.0.0.1:53682/other' });
    expect(wrongRedirect.body).toMatchObject({ error: 'invalid_grant' });

    const third = await authorizationRequest(client);
    const consent3 = await a.owner.request('POST', '/api/oauth/consent', consentBody(third, [a.projectId]));
    const tokens = await exchange(client, third, consent3.body.redirectUrl);
    expect(tokens.access_token).toMatch(/^mcp_[0-9a-f]{64}$/);
    expect(tokens.expires_in).toBe(3600);
    const reuse = await tokenRequest(app, { ...base, code: new URL(consent3.body.redirectUrl).searchParams.get('code')!, code_verifier: third.verifier });
    expect(reuse.body).toMatchObject({ error: 'invalid_grant' });
    expect(reuse.headers.get('cache-control')).toBe('no-store');

    expect((await tokenRequest(app, { grant_type: 'password', username: 'a', password: 'b' })).body).toMatchObject({ error: 'unsupported_grant_type' });
    const json = await fetch(`${app.urls.control}/api/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(json.status).toBe(400);
    expect(await json.json()).toMatchObject({ error: 'invalid_request' });
  });

  it('refresh rotates; presenting a spent refresh token revokes the whole connection', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', client);
    const { oauth, as } = client;
    const refreshed = await oauth.processRefreshTokenResponse(as, client.client, await oauth.refreshTokenGrantRequest(as, client.client, oauth.None(), conn.refreshToken, client.options));
    expect(refreshed.access_token).toMatch(/^mcp_/);
    expect(refreshed.refresh_token).not.toBe(conn.refreshToken);
    expect((await app.request('GET', `/api/flags?projectId=${a.projectId}`, bearer(refreshed.access_token))).status).toBe(200);

    const reuse = await tokenRequest(app, { grant_type: 'refresh_token', refresh_token: conn.refreshToken, client_id: client.client.client_id });
    expect(reuse.body).toMatchObject({ error: 'invalid_grant' });
    // The thief and the owner both lose the connection: every token of it is dead.
    expect((await app.request('GET', `/api/flags?projectId=${a.projectId}`, bearer(refreshed.access_token))).status).toBe(401);
    expect((await tokenRequest(app, { grant_type: 'refresh_token', refresh_token: refreshed.refresh_token!, client_id: client.client.client_id })).body).toMatchObject({ error: 'invalid_grant' });
  });
});

describe('connector tokens in the authorization gate', () => {
  it('reach only the consented projects, as the user', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', client);
    const me = await app.request('GET', '/api/users/me', bearer(conn.accessToken));
    expect(me.status).toBe(200);
    expect(me.body.credential).toMatchObject({ type: 'connector_token', scope: 'read', projectIds: [a.projectId] });
    expect((await app.request('GET', `/api/flags?projectId=${a.projectId}`, bearer(conn.accessToken))).status).toBe(200);
    expect((await app.request('GET', `/api/flags/${flagKey}?${flagRef(a)}`, bearer(conn.accessToken))).status).toBe(200);
    // B: the user is a member there, the connection is not.
    expect((await app.request('GET', `/api/flags?projectId=${b.projectId}`, bearer(conn.accessToken))).status).toBe(404);
    expect((await app.request('GET', `/api/flags/${flagKey}?${flagRef(b)}`, bearer(conn.accessToken))).status).toBe(404);
    const projects = await app.request('GET', '/api/projects', bearer(conn.accessToken));
    expect(projects.status).toBe(200);
    expect(JSON.stringify(projects.body)).not.toContain(b.projectId);
    expect((await app.request('GET', `/api/orgs/${a.orgId}/alert-channels`, bearer(conn.accessToken))).status).toBe(403);
    // What spans the whole account is beyond the consent.
    for (const path of ['/api/orgs', '/api/notifications', '/api/users/me/tokens']) {
      expect([path, (await app.request('GET', path, bearer(conn.accessToken))).status]).toEqual([path, 403]);
    }
  });

  it('read scope cannot write; write scope writes as the connection, never beyond the role', async () => {
    const reader = await connect(app, a.owner, [a.projectId], 'read', client);
    expect((await app.request('POST', `/api/flags/${flagKey}/toggle?${flagRef(a)}`, { ...bearer(reader.accessToken), body: {} })).status).toBe(403);

    const writer = await connect(app, a.owner, [a.projectId, b.projectId], 'write', client);
    const toggled = await app.request('POST', `/api/flags/${flagKey}/toggle?${flagRef(a)}`, { ...bearer(writer.accessToken), body: { enabled: true } });
    expect(toggled.status).toBe(200);
    expect(toggled.body.enabled).toBe(true);
    const connections = await a.owner.request('GET', '/api/users/me/connections');
    const connectionId = connections.body.connections.find((c: { scope: string; projectIds: string[] }) => c.scope === 'write' && c.projectIds.length === 2).id;
    const history = await a.owner.request('GET', `/api/flags/${flagKey}/history?${flagRef(a)}`);
    expect(history.body.versions?.[0]?.actor ?? JSON.stringify(history.body)).toContain(`mcp:${connectionId}`);
    // In B the user is a member: the connection may toggle but not delete (the role has no delete).
    expect((await app.request('DELETE', `/api/flags/${flagKey}?${flagRef(b)}`, bearer(writer.accessToken))).status).toBe(403);
    // Settings need the admin tier a connector never has, even for the owner.
    expect((await app.request('PATCH', `/api/projects/${a.projectId}`, { ...bearer(writer.accessToken), body: { description: 'x' } })).status).toBe(403);
  });

  it('are refused on evaluation, personal-token management and connections', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'write', client);
    const evaluate = await app.request('POST', '/api/flags/evaluate', { ...bearer(conn.accessToken), body: { flagKey, serviceId: a.serviceId, environment: 'production', context: {} } });
    expect(evaluate.status).toBe(403);
    expect((await app.request('GET', '/api/users/me/personal-tokens', bearer(conn.accessToken))).status).toBe(403);
    expect((await app.request('GET', '/api/users/me/connections', bearer(conn.accessToken))).status).toBe(403);
  });

  it('lose what the user loses: removed from the project, the connection loses it too', async () => {
    const conn = await connect(app, b.member, [b.projectId], 'read', client);
    expect((await app.request('GET', `/api/flags?projectId=${b.projectId}`, bearer(conn.accessToken))).status).toBe(200);
    expect((await b.owner.request('DELETE', `/api/projects/${b.projectId}/members/${b.member.id}`)).status).toBe(204);
    expect((await app.request('GET', `/api/flags?projectId=${b.projectId}`, bearer(conn.accessToken))).status).toBe(404);
  });
});

describe('revocation (RFC 7009)', () => {
  it('a client revoking its refresh token ends its connection; other clients cannot', async () => {
    const conn = await connect(app, a.member, [a.projectId], 'read', client);
    const other = await registerClient(app);
    const { oauth, as } = other;
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, other.client, oauth.None(), conn.refreshToken, other.options));
    expect((await app.request('GET', `/api/flags?projectId=${a.projectId}`, bearer(conn.accessToken))).status).toBe(200);
    await client.oauth.processRevocationResponse(await client.oauth.revocationRequest(client.as, client.client, client.oauth.None(), conn.refreshToken, client.options));
    expect((await app.request('GET', `/api/flags?projectId=${a.projectId}`, bearer(conn.accessToken))).status).toBe(401);
    // Unknown tokens are not reported.
    await client.oauth.processRevocationResponse(await client.oauth.revocationRequest(client.as, client.client, client.oauth.None(), 'mcpr_unknown', client.options));
  });
});

describe('connections', () => {
  it('are listed and revoked from a session only; a revoked connection is a 401', async () => {
    const conn = await connect(app, a.viewer, [a.projectId], 'read', client);
    const list = await a.viewer.request('GET', '/api/users/me/connections');
    expect(list.status).toBe(200);
    expect(list.body.connections).toHaveLength(1);
    const [connection] = list.body.connections;
    expect(connection).toMatchObject({ client: { id: client.client.client_id, name: 'Test assistant' }, projectIds: [a.projectId], scope: 'read' });
    expect(JSON.stringify(list.body)).not.toMatch(/mcp_[0-9a-f]{64}/);

    const pat = await personalToken(a.viewer, 'admin');
    expect((await app.request('GET', '/api/users/me/connections', bearer(pat))).status).toBe(403);
    expect((await app.request('DELETE', `/api/users/me/connections/${connection.id}`, bearer(pat))).status).toBe(403);
    expect((await app.request('DELETE', `/api/users/me/connections/${connection.id}`, { cookie: a.viewer.cookie })).status).toBe(403);
    expect((await app.request('GET', '/api/users/me/connections')).status).toBe(401);
    // Another user's connection is not found.
    expect((await a.member.request('DELETE', `/api/users/me/connections/${connection.id}`)).status).toBe(404);

    expect((await a.viewer.request('DELETE', `/api/users/me/connections/${connection.id}`)).status).toBe(204);
    expect((await app.request('GET', `/api/flags?projectId=${a.projectId}`, bearer(conn.accessToken))).status).toBe(401);
    expect((await a.viewer.request('GET', '/api/users/me/connections')).body.connections).toHaveLength(0);
    const refresh = await tokenRequest(app, { grant_type: 'refresh_token', refresh_token: conn.refreshToken, client_id: client.client.client_id });
    expect(refresh.body).toMatchObject({ error: 'invalid_grant' });
    expect((await app.request('GET', '/api/flags', bearer(`mcp_${'0'.repeat(64)}`))).status).toBe(401);
  });
});

describe('registration rate limit', () => {
  // Last: it spends this address's registrations for the window.
  it('answers 429 past 20 registrations per address per window', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 25; i++) statuses.push((await app.request('POST', '/api/oauth/register', { body: { redirect_uris: ['https://a.example.com/cb'] } })).status);
    expect(statuses).toContain(429);
    expect(statuses.filter((s) => s === 201).length).toBeLessThanOrEqual(20);
  });
});
