import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connect, registerClient, type OAuthClient } from '../oauth/support';
import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createFlag, createProject, expectStatus, type Project } from '../webhooks/support';
import { mcpClient, tool } from './support';

/**
 * Change requests through the hosted MCP server (docs/mcp.md#change-requests): an assistant acts
 * as its user, so it opens, approves and applies exactly as that user could over REST.
 */

let app: TestApp;
let a: Project;
let b: Project;
let oauthClient: OAuthClient;
const flagKey = `mcp-cr-${Date.now().toString(36)}`;
const ref = (p: Project) => ({ key: flagKey, serviceId: p.serviceId, environment: 'production' });
const toggleOn = (p: Project) => ({ serviceId: p.serviceId, environment: 'production', flagKey, action: 'toggle', body: { enabled: true } });
const open: Client[] = [];

/** A write connection of `user` to `projectIds`. */
async function assistant(user: TestUser, projectIds: string[]): Promise<Client> {
  const conn = await connect(app, user, projectIds, 'write', oauthClient);
  return mcpClient(app, conn.accessToken, open);
}

/** Production needs one approval by an owner or admin, never the author's own. */
async function protectProduction(p: Project) {
  const policy = { environments: { production: { requiredApprovals: 1, approverRoles: ['owner', 'admin'], allowSelfApproval: false } } };
  expectStatus(await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, policy), 200, 'change policy');
}

beforeAll(async () => {
  app = await startTestApp();
  a = await createProject(app);
  b = await createProject(app);
  // A's owner is also B's admin: the connection, not the user, keeps B out of reach.
  expectStatus(await b.owner.request('POST', `/api/projects/${b.projectId}/members`, { userId: a.owner.id, role: 'admin' }), 201, 'add to B');
  for (const p of [a, b]) {
    await createFlag(p.owner, p.serviceId, flagKey);
    await protectProduction(p);
  }
  oauthClient = await registerClient(app);
}, 60_000);
afterAll(async () => {
  for (const client of open) await client.close().catch(() => undefined);
  await app?.stop();
});

describe('change request tools', () => {
  it('a flag write to a protected environment is a tool error that says to open a change request', async () => {
    const client = await assistant(a.member, [a.projectId]);
    const refused = await tool(client, 'toggle_flag', { ...ref(a), enabled: true, confirm: true });
    expect(refused).toMatchObject({ isError: true, status: 403, code: 'APPROVAL_REQUIRED', environment: 'production', changeRequestChange: toggleOn(a) });
    expect(refused.next).toContain('create_change_request');
    expect(await tool(client, 'get_flag', ref(a))).toMatchObject({ enabled: false });
  });

  it('open, list and show; a member cannot approve; another user approves; apply previews, then applies', async () => {
    const member = await assistant(a.member, [a.projectId]);
    const opened = await tool(member, 'create_change_request', { projectId: a.projectId, title: 'Turn it on', changes: [toggleOn(a)] });
    expect(opened).toMatchObject({ projectId: a.projectId, status: 'pending', requiredApprovals: 1, createdBy: a.member.id, changes: [{ ...toggleOn(a), baseVersion: 1 }] });
    const requestRef = { projectId: a.projectId, requestId: opened.id };

    const listed = await tool(member, 'list_change_requests', { projectId: a.projectId, status: 'pending' });
    expect(listed.changeRequests.map((r: { id: string }) => r.id)).toContain(opened.id);
    expect((await tool(member, 'list_change_requests', { projectId: a.projectId, status: 'applied' })).changeRequests).toEqual([]);
    const shown = await tool(member, 'get_change_request', requestRef);
    expect(shown).toMatchObject({ id: opened.id, impact: [expect.objectContaining({ flagKey, environment: 'production' })], actions: { approve: false } });

    // The policy names owners and admins: the member is neither.
    expect(await tool(member, 'approve_change_request', requestRef)).toMatchObject({ isError: true, status: 403, message: expect.stringMatching(/only owner or admin may approve/) });

    const admin = await assistant(a.admin, [a.projectId]);
    const approved = await tool(admin, 'approve_change_request', { ...requestRef, comment: 'looks right' });
    expect(approved).toMatchObject({ status: 'approved', approvals: [{ userId: a.admin.id, comment: 'looks right' }] });

    const preview = await tool(member, 'apply_change_request', requestRef);
    expect(preview).toMatchObject({ applied: false, changeRequest: { status: 'approved' } });
    expect(await tool(member, 'get_flag', ref(a))).toMatchObject({ enabled: false });
    const applied = await tool(member, 'apply_change_request', { ...requestRef, confirm: true });
    expect(applied).toMatchObject({ applied: true, changeRequest: { status: 'applied', appliedAt: expect.any(String) } });
    expect(await tool(member, 'get_flag', ref(a))).toMatchObject({ enabled: true });
  });

  it('the author cannot approve their own request; an owner rejects it', async () => {
    const admin = await assistant(a.admin, [a.projectId]);
    const opened = await tool(admin, 'create_change_request', { projectId: a.projectId, title: 'Off again', changes: [{ ...toggleOn(a), body: { enabled: false } }] });
    const requestRef = { projectId: a.projectId, requestId: opened.id };
    expect(opened.actions.approve).toBe(false);
    expect(await tool(admin, 'approve_change_request', requestRef)).toMatchObject({ isError: true, status: 403, message: expect.stringMatching(/your own/) });
    expect(await tool(admin, 'apply_change_request', { ...requestRef, confirm: true })).toMatchObject({ isError: true });

    const owner = await assistant(a.owner, [a.projectId]);
    expect(await tool(owner, 'reject_change_request', requestRef)).toMatchObject({ isError: true, message: expect.stringMatching(/comment/) });
    const rejected = await tool(owner, 'reject_change_request', { ...requestRef, comment: 'not now' });
    expect(rejected).toMatchObject({ status: 'rejected', rejection: { userId: a.owner.id, comment: 'not now' } });
  });

  it('canary_start in a protected environment runs under an approved change request of the flag', async () => {
    const admin = await assistant(a.admin, [a.projectId]);
    const canary = { ...ref(a), initialRolloutPercent: 5, targetRolloutPercent: 50, rampStepPercent: 15, soakPeriodMinutes: 60, errorRateGateDelta: 0.01, latencyGateDeltaMs: 50, autoRollbackOnBreach: true };
    const refused = await tool(admin, 'canary_start', canary);
    expect(refused).toMatchObject({ isError: true, status: 403, code: 'APPROVAL_REQUIRED' });
    expect(refused.next).toContain('changeRequestId');

    const opened = await tool(admin, 'create_change_request', { projectId: a.projectId, title: 'Ramp it', changes: [{ ...toggleOn(a), action: 'update', body: { description: 'ramped by a canary' } }] });
    const owner = await assistant(a.owner, [a.projectId]);
    expect(await tool(owner, 'approve_change_request', { projectId: a.projectId, requestId: opened.id })).toMatchObject({ status: 'approved' });
    const started = await tool(admin, 'canary_start', { ...canary, changeRequestId: opened.id });
    expect(started).toMatchObject({ flagKey, status: 'running' });
    expect(await tool(admin, 'canary_abort', { ...ref(a), reason: 'test done' })).not.toMatchObject({ isError: true });
  });

  it('a read connection reads change requests but cannot open or approve one', async () => {
    const conn = await connect(app, a.owner, [a.projectId], 'read', oauthClient);
    const reader = await mcpClient(app, conn.accessToken, open);
    expect((await tool(reader, 'list_change_requests', { projectId: a.projectId })).total).toBeGreaterThan(0);
    expect(await tool(reader, 'create_change_request', { projectId: a.projectId, title: 'x', changes: [toggleOn(a)] })).toMatchObject({ isError: true, status: 403 });
  });

  it("another project's requests are not found, whether the connection leaves it out or the id belongs to it", async () => {
    const inB = await tool(await assistant(b.owner, [b.projectId]), 'create_change_request', { projectId: b.projectId, title: 'In B', changes: [toggleOn(b)] });
    // A's owner is B's admin, but this connection covers A only.
    const onlyA = await assistant(a.owner, [a.projectId]);
    expect(await tool(onlyA, 'list_change_requests', { projectId: b.projectId })).toMatchObject({ isError: true, status: 404 });
    expect(await tool(onlyA, 'get_change_request', { projectId: b.projectId, requestId: inB.id })).toMatchObject({ isError: true, status: 404 });
    // Covering both, B's request is still not A's.
    const both = await assistant(a.owner, [a.projectId, b.projectId]);
    expect(await tool(both, 'get_change_request', { projectId: a.projectId, requestId: inB.id })).toMatchObject({ isError: true, status: 404 });
    expect(await tool(both, 'approve_change_request', { projectId: a.projectId, requestId: inB.id })).toMatchObject({ isError: true, status: 404 });
    expect(await tool(both, 'approve_change_request', { projectId: b.projectId, requestId: inB.id })).toMatchObject({ status: 'approved' });
  });
});
