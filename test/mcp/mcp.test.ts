import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { approveInBrowser, connect, REDIRECT_URI, registerClient, type OAuthClient } from '../oauth/support';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createFlag, createProject, expectStatus, personalToken, type Project } from '../webhooks/support';
import { mcpClient as connectMcp, tool } from './support';

/**
 * The hosted MCP server (docs/api-reference.md#connector-tokens,
 * docs/api-reference.md#oauth-and-mcp): the SDK's client with a connector token from the full OAuth
 * flow.
 */

let app: TestApp;
let a: Project;
let b: Project;
let oauthClient: OAuthClient;
const flagKey = `mcp-tool-${Date.now().toString(36)}`;
const ref = (p: Project) => ({ key: flagKey, serviceId: p.serviceId, environment: 'production' });
const open: Client[] = [];

const mcpClient = (accessToken: string) => connectMcp(app, accessToken, open);

async function connectionIdOf(p: Project, accessToken: string): Promise<string> {
  const me = await app.request('GET', '/api/users/me', { token: accessToken });
  return me.body.credential.id as string;
}

beforeAll(async () => {
  app = await startTestApp();
  a = await createProject(app);
  b = await createProject(app);
  expectStatus(await b.owner.request('POST', `/api/projects/${b.projectId}/members`, { userId: a.owner.id, role: 'admin' }), 201, 'add to B');
  await createFlag(a.owner, a.serviceId, flagKey);
  await createFlag(b.owner, b.serviceId, flagKey);
  oauthClient = await registerClient(app);
});
afterAll(async () => {
  for (const client of open) await client.close().catch(() => undefined);
  await app?.stop();
});

describe('the MCP endpoint', () => {
  it('answers 401 with the protected-resource metadata without a token, with a bad one, and with other credentials', async () => {
    const metadata = `resource_metadata="${app.urls.control}/.well-known/oauth-protected-resource/mcp"`;
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    const headers = { accept: 'application/json, text/event-stream' };
    const none = await app.request('POST', '/mcp', { body: init, headers });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toContain(metadata);
    const bad = await app.request('POST', '/mcp', { body: init, headers, token: `mcp_${'a'.repeat(64)}` });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toContain('error="invalid_token"');
    const pat = await app.request('POST', '/mcp', { body: init, headers, token: await personalToken(a.owner, 'admin') });
    expect(pat.status).toBe(401);
    expect(pat.headers.get('www-authenticate')).toContain(metadata);
    const session = await app.request('POST', '/mcp', { body: init, headers, cookie: a.owner.cookie, csrf: a.owner.csrf });
    expect(session.status).toBe(401);
    expect((await app.request('GET', '/mcp')).status).toBe(401);
  });

  it('lists the tools to a client connected with a connector token', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', oauthClient);
    const client = await mcpClient(conn.accessToken);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'approve_change_request',
        'apply_change_request',
        'audit_search',
        'canary_abort',
        'canary_start',
        'canary_status',
        'create_change_request',
        'evaluate',
        'explain',
        'flag_metrics',
        'get_change_request',
        'get_flag',
        'list_change_requests',
        'list_flags',
        'list_projects',
        'reject_change_request',
        'simulate',
        'toggle_flag',
        'toggle_impact',
        'update_targeting',
      ].sort(),
    );
    const toggle = tools.find((t) => t.name === 'toggle_flag')!;
    expect(toggle.inputSchema.required).toEqual(expect.arrayContaining(['key', 'serviceId', 'environment', 'enabled']));
  });
});

/**
 * The SDK's own OAuth client (what MCP clients ship), with the user's browser played by
 * approveInBrowser: it starts from the 401, discovers, registers, sends the user to consent, and
 * exchanges the code the redirect brings back.
 */
class BrowserlessProvider implements OAuthClientProvider {
  private info?: OAuthClientInformationMixed;
  private saved?: OAuthTokens;
  private verifier = '';
  code?: string;

  constructor(
    private readonly user: TestUser,
    private readonly projectIds: string[],
  ) {}

  get redirectUrl() {
    return REDIRECT_URI;
  }
  get clientMetadata() {
    return { client_name: 'SDK client', redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none', scope: 'write' };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  async redirectToAuthorization(url: URL) {
    const consent = await approveInBrowser(this.user, url, this.projectIds);
    if (consent.status !== 200) throw new Error(`consent failed: ${consent.status} ${consent.text}`);
    this.code = new URL(consent.body.redirectUrl).searchParams.get('code') ?? undefined;
  }
}

describe('an MCP client with the SDK\'s OAuth support', () => {
  it('goes from the 401 through discovery, registration, consent and PKCE to calling tools', async () => {
    const provider = new BrowserlessProvider(a.owner, [a.projectId]);
    const url = new URL(`${app.urls.control}/mcp`);
    const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await expect(new Client({ name: 'sdk-oauth', version: '1' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.code).toEqual(expect.any(String));
    await first.finishAuth(provider.code!);
    expect(provider.tokens()?.access_token).toMatch(/^mcp_[0-9a-f]{64}$/);

    const client = new Client({ name: 'sdk-oauth', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    open.push(client);
    expect((await tool(client, 'list_projects')).projects.map((p: { id: string }) => p.id)).toEqual([a.projectId]);
    const me = await app.request('GET', '/api/users/me', { token: provider.tokens()!.access_token });
    expect(me.body.credential).toMatchObject({ type: 'connector_token', scope: 'write', projectIds: [a.projectId] });
  });
});

describe('tools', () => {
  it('read the consented project only: project B is not found, by tool as by REST', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', oauthClient);
    const client = await mcpClient(conn.accessToken);
    const projects = await tool(client, 'list_projects');
    expect(projects.projects.map((p: { id: string }) => p.id)).toEqual([a.projectId]);
    const flags = await tool(client, 'list_flags', { projectId: a.projectId });
    expect(flags.flags.map((f: { key: string }) => f.key)).toContain(flagKey);
    expect(await tool(client, 'get_flag', ref(a))).toMatchObject({ key: flagKey, enabled: false });

    expect(await tool(client, 'list_flags', { projectId: b.projectId })).toMatchObject({ isError: true, status: 404 });
    expect(await tool(client, 'get_flag', ref(b))).toMatchObject({ isError: true, status: 404 });
    // A read connection is refused any write first, as a read-tier token is over REST.
    expect(await tool(client, 'toggle_flag', { ...ref(b), enabled: true, confirm: true })).toMatchObject({ isError: true, status: 403 });
    expect(await tool(client, 'audit_search', { projectId: b.projectId })).toMatchObject({ isError: true, status: 404 });
    expect((await app.request('GET', `/api/flags?projectId=${b.projectId}`, { token: conn.accessToken })).status).toBe(404);
  });

  it('evaluate and explain on the snapshot evaluation serves', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', oauthClient);
    const client = await mcpClient(conn.accessToken);
    const evaluated = await eventually(async () => {
      const r = await tool(client, 'evaluate', { ...ref(a), context: { targetingKey: 'user-1' } });
      return r.isError ? undefined : r;
    });
    const rest = await a.owner.request('POST', `/api/flags/${flagKey}/explain`, { serviceId: a.serviceId, environment: 'production', context: { targetingKey: 'user-1' } });
    expect(rest.status).toBe(200);
    expect(evaluated).toMatchObject({ flagKey, value: rest.body.value, reason: rest.body.reason });
    expect(await tool(client, 'explain', { ...ref(a), context: { targetingKey: 'user-1' } })).toEqual(rest.body);
    // The explain route's 64 KB body limit holds for the tool's arguments too.
    expect(await tool(client, 'explain', { ...ref(a), context: { targetingKey: 'user-1', blob: 'x'.repeat(100_000) } })).toMatchObject({ isError: true, status: 413 });
  });

  it('a read connection previews a toggle but cannot apply it', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', oauthClient);
    const client = await mcpClient(conn.accessToken);
    const preview = await tool(client, 'toggle_flag', { ...ref(a), enabled: true });
    expect(preview).toMatchObject({ applied: false, current: { enabled: false }, candidate: { enabled: true } });
    expect(preview.simulation).toMatchObject({ flagKey, cohortSize: expect.any(Number) });
    expect(await tool(client, 'toggle_flag', { ...ref(a), enabled: true, confirm: true })).toMatchObject({ isError: true, status: 403 });
    expect(await tool(client, 'get_flag', ref(a))).toMatchObject({ enabled: false });
  });

  it('a write connection toggles and retargets only on confirm, through the flag write path, attributed to the connection', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'write', oauthClient);
    const connectionId = await connectionIdOf(a, conn.accessToken);
    const client = await mcpClient(conn.accessToken);

    const preview = await tool(client, 'toggle_flag', { ...ref(a), enabled: true });
    expect(preview.applied).toBe(false);
    expect((await a.owner.request('GET', `/api/flags/${flagKey}?serviceId=${a.serviceId}&environment=production`)).body.enabled).toBe(false);
    const stale = await tool(client, 'toggle_flag', { ...ref(a), enabled: true, confirm: true, expectedVersion: preview.current.version + 5 });
    expect(stale).toMatchObject({ isError: true, status: 409 });
    const applied = await tool(client, 'toggle_flag', { ...ref(a), enabled: true, confirm: true, expectedVersion: preview.current.version });
    expect(applied).toMatchObject({ applied: true, flag: { enabled: true } });

    const targeting = [{ id: 'beta', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: true }];
    const retargetPreview = await tool(client, 'update_targeting', { ...ref(a), targeting });
    expect(retargetPreview).toMatchObject({ applied: false, current: { targeting: [] } });
    expect(await tool(client, 'get_flag', ref(a))).toMatchObject({ targeting: [] });
    const retargeted = await tool(client, 'update_targeting', { ...ref(a), targeting, confirm: true });
    expect(retargeted.flag.targeting).toHaveLength(1);
    expect(await tool(client, 'update_targeting', { ...ref(a), targeting: [{ id: 'x', conditions: 'nope' }], confirm: true })).toMatchObject({ isError: true, message: expect.stringMatching(/validation/i) });
    // Project B: the user is its admin, the connection does not cover it.
    expect(await tool(client, 'toggle_flag', { ...ref(b), enabled: true, confirm: true })).toMatchObject({ isError: true, status: 404 });

    const audit = await tool(client, 'audit_search', { projectId: a.projectId, limit: 10 });
    const entries = JSON.stringify(audit);
    expect(entries).toContain(`mcp:${connectionId}`);
    const history = await a.owner.request('GET', `/api/flags/${flagKey}/history?serviceId=${a.serviceId}&environment=production`);
    expect(history.body.versions.slice(0, 2).map((v: { actor: string }) => v.actor)).toEqual([`mcp:${connectionId}`, `mcp:${connectionId}`]);
  });

  it('flag metrics, toggle impact and canary status answer through their routes', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', oauthClient);
    const client = await mcpClient(conn.accessToken);
    const metrics = await tool(client, 'flag_metrics', { ...ref(a), range: '1h' });
    expect(metrics.isError).toBeUndefined();
    const impact = await tool(client, 'toggle_impact', ref(a));
    expect(impact.isError).toBeUndefined();
    expect(await tool(client, 'canary_status', ref(a))).toMatchObject({ isError: true, status: 404 });
    expect(await tool(client, 'canary_abort', { ...ref(a), reason: 'no' })).toMatchObject({ isError: true, status: 403 });
  });

  it('a write connection starts and aborts a canary', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'write', oauthClient);
    const client = await mcpClient(conn.accessToken);
    const started = await tool(client, 'canary_start', {
      ...ref(a),
      initialRolloutPercent: 5,
      targetRolloutPercent: 50,
      rampStepPercent: 15,
      soakPeriodMinutes: 60,
      errorRateGateDelta: 0.01,
      latencyGateDeltaMs: 50,
      autoRollbackOnBreach: true,
    });
    expect(started.isError).toBeUndefined();
    expect(started).toMatchObject({ flagKey });
    expect((await tool(client, 'canary_status', ref(a))).flagKey).toBe(flagKey);
    const aborted = await tool(client, 'canary_abort', { ...ref(a), reason: 'testing abort through MCP' });
    expect(aborted.isError).toBeUndefined();
  });

  it('stop at once when the connection is revoked', async () => {
    const conn = await connect(app, a.member, [a.projectId], 'read', oauthClient);
    const client = await mcpClient(conn.accessToken);
    expect((await tool(client, 'list_projects')).projects).toHaveLength(1);
    const connectionId = await connectionIdOf(a, conn.accessToken);
    expect((await a.member.request('DELETE', `/api/users/me/connections/${connectionId}`)).status).toBe(204);
    await expect(client.callTool({ name: 'list_projects', arguments: {} })).rejects.toThrow(/401|Unauthorized/i);
  });
});
