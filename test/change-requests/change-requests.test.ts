import { randomBytes } from 'node:crypto';
import { eventually, startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createFlag, createProject, createWebhook, expectStatus, opaqueToken, personalToken, qs, startReceiver, type Project, type Receiver } from '../webhooks/support';

/**
 * Change policy, the gate on every write path, and change requests (docs/change-requests.md),
 * through HTTP against the real backends.
 */

let app: TestApp;
let receiver: Receiver;

beforeAll(async () => {
  app = await startTestApp();
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const newKey = (label: string) => `${label}-${randomBytes(3).toString('hex')}`;
const at = (serviceId: string, environment = 'production') => qs({ serviceId, environment });
const PROTECTED = { production: { requiredApprovals: 1, approverRoles: ['owner', 'admin'] } };

async function protect(p: Project, environments: Record<string, unknown> = PROTECTED) {
  const res = await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments });
  expectStatus(res, 200, 'put policy');
  return res.body;
}

async function flag(p: Project, key: string, environment = 'production') {
  const res = await p.owner.request('GET', `/api/flags/${key}${at(p.serviceId, environment)}`);
  expectStatus(res, 200, 'get flag');
  return res.body as { enabled: boolean; version: number; targeting: { rolloutPercentage?: number }[] };
}

async function open(user: TestUser, p: Project, body: Record<string, unknown>) {
  return user.request('POST', `/api/projects/${p.projectId}/change-requests`, body);
}

async function mailbox(to: string): Promise<{ subject: string; text?: string }[]> {
  return (await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(to)}`)).body.messages ?? [];
}

const requestPath = (p: Project, id: string, step = '') => `/api/projects/${p.projectId}/change-requests/${id}${step ? `/${step}` : ''}`;

async function auditOf(p: Project, action: string) {
  const res = await p.owner.request('GET', `/api/audit${qs({ projectId: p.projectId, action, limit: 100 })}`);
  expectStatus(res, 200, 'audit');
  return res.body.logs as { action: string; metadata: Record<string, unknown>; resourceId: string }[];
}

describe('change policy', () => {
  it('is set by an owner or admin only, validated, and answered as set', async () => {
    const p = await createProject(app);
    expect((await p.owner.request('GET', `/api/projects/${p.projectId}/change-policy`)).body).toEqual({ environments: {} });
    expectStatus(await p.member.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: PROTECTED }), 403, 'member');
    expectStatus(await p.admin.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: PROTECTED }), 200, 'admin');
    const bad = await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: { production: { requiredApprovals: 6, approverRoles: ['admin'] } } });
    expect(bad.status).toBe(400);
    expect((await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: { production: { requiredApprovals: 1, approverRoles: ['viewer'] } } })).status).toBe(400);
    expect((await p.viewer.request('GET', `/api/projects/${p.projectId}/change-policy`)).body).toEqual({
      environments: { production: { requiredApprovals: 1, approverRoles: ['owner', 'admin'], allowSelfApproval: false, emergencyReduce: 'allow' } },
    });
    const other = await createProject(app);
    expect((await other.owner.request('GET', `/api/projects/${p.projectId}/change-policy`)).status).toBe(404);
    expect((await other.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: {} })).status).toBe(404);
  });
});

describe('the gate', () => {
  let p: Project;
  beforeAll(async () => {
    p = await createProject(app);
    await protect(p);
  });

  it('refuses a direct write that widens a protected environment, changing nothing, and lets other environments through', async () => {
    const key = newKey('gated');
    await createFlag(p.owner, p.serviceId, key, 'development');
    const created = await p.owner.request('POST', '/api/flags', { key, serviceId: p.serviceId, environment: 'production', name: key, type: 'boolean' });
    expect(created.status).toBe(403);
    expect(created.body).toMatchObject({ code: 'APPROVAL_REQUIRED', environment: 'production' });
    expect(created.body.message).toMatch(/^Forbidden: changes to production need 1 approval/);
    expect((await p.owner.request('GET', `/api/flags/${key}${at(p.serviceId)}`)).status).toBe(404);
    // Creating in every environment is refused whole: not even development's copy of a new key.
    const everywhere = newKey('everywhere');
    expect((await p.owner.request('POST', '/api/flags', { key: everywhere, serviceId: p.serviceId, name: everywhere })).status).toBe(403);
    expect((await p.owner.request('GET', `/api/flags/${everywhere}${at(p.serviceId, 'development')}`)).status).toBe(404);
    expectStatus(await p.member.request('POST', `/api/flags/${key}/toggle${at(p.serviceId, 'development')}`, { enabled: true }), 200, 'development toggle');
  });

  it('lets an exposure-reducing change through as an audited bypass, and refuses it when the policy says approve', async () => {
    const key = newKey('reduce');
    await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: {} });
    await createFlag(p.owner, p.serviceId, key);
    expectStatus(await p.owner.request('PATCH', `/api/flags/${key}${at(p.serviceId)}`, { enabled: true, targeting: [{ id: 'r1', conditions: [], value: true, rolloutPercentage: 50 }] }), 200, 'set up');
    await protect(p);
    const before = await flag(p, key);

    const widen = await p.member.request('PATCH', `/api/flags/${key}${at(p.serviceId)}`, { targeting: [{ id: 'r1', conditions: [], value: true, rolloutPercentage: 80 }] });
    expect(widen.status).toBe(403);
    expect(widen.body.code).toBe('APPROVAL_REQUIRED');
    expect((await flag(p, key)).version).toBe(before.version);

    expectStatus(await p.member.request('PATCH', `/api/flags/${key}${at(p.serviceId)}`, { targeting: [{ id: 'r1', conditions: [], value: true, rolloutPercentage: 20 }] }), 200, 'rollout down');
    expectStatus(await p.member.request('POST', `/api/flags/${key}/toggle${at(p.serviceId)}`, { enabled: false }), 200, 'disable');
    expect((await p.member.request('POST', `/api/flags/${key}/toggle${at(p.serviceId)}`, { enabled: true })).body.code).toBe('APPROVAL_REQUIRED');
    const bypasses = (await auditOf(p, 'flag.toggle')).filter((e) => e.metadata.bypass === 'emergency-reduce');
    expect(bypasses.length).toBeGreaterThanOrEqual(1);
    // The approvers hear of it (the owner and the admin; the member who did it is not an approver).
    for (const approver of [p.owner, p.admin]) await eventually(async () => (await mailbox(approver.email)).some((m) => /emergency change in production/.test(m.subject)));

    await protect(p, { production: { requiredApprovals: 1, approverRoles: ['admin'], emergencyReduce: 'approve' } });
    const down = await p.member.request('PATCH', `/api/flags/${key}${at(p.serviceId)}`, { targeting: [{ id: 'r1', conditions: [], value: true, rolloutPercentage: 10 }] });
    expect(down.status).toBe(403);
    await protect(p);
  });

  it('gates bulk, rollback, triggers and cohort rules used in the protected environment', async () => {
    const key = newKey('paths');
    await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: {} });
    await createFlag(p.owner, p.serviceId, key);
    const cohort = await p.owner.request('POST', `/api/projects/${p.projectId}/cohorts`, { name: newKey('beta'), rules: [{ conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }] }] });
    expectStatus(cohort, 201, 'cohort');
    expectStatus(
      await p.owner.request('PATCH', `/api/flags/${key}${at(p.serviceId)}`, { targeting: [{ conditions: [{ property: 'x', operator: 'in_cohort', value: cohort.body.id }], value: true }] }),
      200,
      'use cohort',
    );
    const trigger = await p.owner.request('POST', `/api/flags/${key}/triggers`, { serviceId: p.serviceId, environment: 'production', action: 'enable', name: 'on' });
    expectStatus(trigger, 201, 'trigger');
    await protect(p);

    const cohortEdit = await p.owner.request('PATCH', `/api/projects/${p.projectId}/cohorts/${cohort.body.id}`, { rules: [{ conditions: [{ property: 'plan', operator: 'equals', value: 'free' }] }] });
    expect(cohortEdit.status).toBe(403);
    expect(cohortEdit.body.code).toBe('APPROVAL_REQUIRED');
    expectStatus(await p.owner.request('PATCH', `/api/projects/${p.projectId}/cohorts/${cohort.body.id}`, { description: 'names only' }), 200, 'cohort description');

    const fired = await app.request('POST', new URL(trigger.body.url).pathname);
    expect(fired.status).toBe(403);
    expect((await flag(p, key)).enabled).toBe(false);

    const bulk = await p.owner.request('PATCH', '/api/flags/bulk', { flags: [{ key, serviceId: p.serviceId, environment: 'production', updates: { enabled: true } }] });
    expect(bulk.body.results[0]).toMatchObject({ statusCode: 403, error: expect.stringMatching(/changes to production need 1 approval/) });
    expect((await flag(p, key)).enabled).toBe(false);

    const rollback = await p.member.request('POST', `/api/flags/${key}/rollback/1${at(p.serviceId)}`);
    expect(rollback.status).toBe(200);
  });
});

describe('change requests', () => {
  let p: Project;
  let other: Project;
  beforeAll(async () => {
    p = await createProject(app);
    other = await createProject(app);
  });

  async function protectedFlag(label: string) {
    await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: {} });
    const key = newKey(label);
    await createFlag(p.owner, p.serviceId, key);
    await protect(p);
    return key;
  }

  it('opens, is reviewed by people the policy names, and applies atomically', async () => {
    const key = await protectedFlag('flow');
    const second = newKey('second');
    const hookPath = `/cr-${key}`;
    await createWebhook(p.owner, { projectId: p.projectId, url: receiver.url(hookPath), events: ['change_request.created', 'change_request.approved', 'change_request.applied'] });
    const channelPath = `/alerts-${key}`;
    expectStatus(await p.owner.request('POST', `/api/orgs/${p.orgId}/alert-channels`, { type: 'webhook', name: 'Release bot', url: receiver.url(channelPath) }), 201, 'alert channel');
    const opened = await open(p.member, p, {
      title: 'Launch checkout',
      description: 'Turn it on in production',
      changes: [
        { serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'update', body: { enabled: true } },
        { serviceId: p.serviceId, environment: 'production', flagKey: second, action: 'create', body: { type: 'boolean', enabled: true } },
      ],
    });
    expectStatus(opened, 201, 'open');
    const cr = opened.body;
    expect(cr).toMatchObject({ status: 'pending', requiredApprovals: 1, approverRoles: ['owner', 'admin'], allowSelfApproval: false, approvals: [], conflicts: [], createdBy: p.member.id });
    expect(cr.changes[0]).toMatchObject({ baseVersion: 1, action: 'update' });
    expect(cr.changes[1]).toMatchObject({ baseVersion: null, action: 'create' });
    expect(cr.impact).toHaveLength(2);
    expect(cr.actions).toEqual({ edit: true, approve: false, reject: false, cancel: true, apply: false });

    // Who may not approve: the author, a member (the policy names admins), a viewer, a project token.
    expect((await p.member.request('POST', requestPath(p, cr.id, 'approve'), {})).status).toBe(403);
    expect((await p.viewer.request('POST', requestPath(p, cr.id, 'approve'), {})).status).toBe(403);
    const token = await opaqueToken(p.owner, p.projectId, { read: true, write: true });
    expect((await app.request('POST', requestPath(p, cr.id, 'approve'), { token, body: {} })).status).toBe(403);
    expect((await p.member.request('POST', requestPath(p, cr.id, 'apply'))).status).toBe(409);
    expect((await other.owner.request('POST', requestPath(p, cr.id, 'approve'), {})).status).toBe(404);

    const approved = await p.admin.request('POST', requestPath(p, cr.id, 'approve'), { comment: 'looks right' });
    expectStatus(approved, 200, 'approve');
    expect(approved.body).toMatchObject({ status: 'approved', approvals: [{ userId: p.admin.id, comment: 'looks right' }] });
    expect((await p.admin.request('POST', requestPath(p, cr.id, 'approve'), {})).status).toBe(409);

    const applied = await p.member.request('POST', requestPath(p, cr.id, 'apply'));
    expectStatus(applied, 200, 'apply');
    expect(applied.body.status).toBe('applied');
    expect(applied.body.appliedAt).toEqual(expect.any(String));
    expect((await flag(p, key)).enabled).toBe(true);
    expect((await flag(p, second)).enabled).toBe(true);
    expect((await p.member.request('POST', requestPath(p, cr.id, 'apply'))).status).toBe(409);

    const applyAudit = (await auditOf(p, 'change_request.apply')).find((e) => e.resourceId === cr.id);
    expect(applyAudit?.metadata).toMatchObject({ approvals: [expect.objectContaining({ userId: p.admin.id })], impact: expect.any(Array) });
    const flagAudit = (await auditOf(p, 'flag.update')).find((e) => e.metadata.changeRequestId === cr.id);
    expect(flagAudit).toBeDefined();
    const events = await eventually(async () => {
      const got = receiver.received(hookPath).map((d) => (d.body as { event: string }).event);
      return got.length >= 3 ? got : undefined;
    });
    expect(events).toEqual(['change_request.created', 'change_request.approved', 'change_request.applied']);
    // The organization's alert channels hear of every step too.
    const alerts = await eventually(async () => {
      const got = receiver.received(channelPath).map((d) => JSON.stringify(d.body));
      return got.length >= 3 ? got : undefined;
    });
    expect(alerts.join('\n')).toContain('Launch checkout');
  });

  it('voids approvals on an edit, and never applies a rejected or cancelled request', async () => {
    const key = await protectedFlag('void');
    const cr = (await open(p.member, p, { title: 'v', changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'toggle', body: { enabled: true } }] })).body;
    expectStatus(await p.admin.request('POST', requestPath(p, cr.id, 'approve'), {}), 200, 'approve');
    expect((await p.admin.request('PATCH', requestPath(p, cr.id), { title: 'not mine' })).status).toBe(403);
    const edited = await p.member.request('PATCH', requestPath(p, cr.id), { title: 'v2' });
    expectStatus(edited, 200, 'edit');
    expect(edited.body).toMatchObject({ status: 'pending', approvals: [], title: 'v2' });
    expect((await p.member.request('POST', requestPath(p, cr.id, 'apply'))).status).toBe(409);

    expect((await p.admin.request('POST', requestPath(p, cr.id, 'reject'), {})).status).toBe(400);
    const rejected = await p.admin.request('POST', requestPath(p, cr.id, 'reject'), { comment: 'not now' });
    expectStatus(rejected, 200, 'reject');
    expect(rejected.body).toMatchObject({ status: 'rejected', rejection: { userId: p.admin.id, comment: 'not now' } });
    expect((await p.admin.request('POST', requestPath(p, cr.id, 'approve'), {})).status).toBe(409);
    expect((await p.member.request('POST', requestPath(p, cr.id, 'apply'))).status).toBe(409);
    expect((await flag(p, key)).enabled).toBe(false);

    const second = (await open(p.member, p, { title: 'c', changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'toggle', body: {} }] })).body;
    expect((await p.viewer.request('POST', requestPath(p, second.id, 'cancel'))).status).toBe(403);
    expectStatus(await p.member.request('POST', requestPath(p, second.id, 'cancel')), 200, 'cancel');
    expect((await p.admin.request('POST', requestPath(p, second.id, 'approve'), {})).status).toBe(409);
    expect((await p.member.request('GET', `/api/projects/${p.projectId}/change-requests${qs({ status: 'cancelled' })}`)).body.changeRequests.map((r: { id: string }) => r.id)).toContain(second.id);
  });

  it('shows a flag that moved since, and fails the apply whole with CONFLICT', async () => {
    const key = await protectedFlag('conflict');
    const untouched = await protectedFlag('untouched');
    const cr = (
      await open(p.member, p, {
        title: 'x',
        changes: [
          { serviceId: p.serviceId, environment: 'production', flagKey: untouched, action: 'toggle', body: { enabled: true } },
          { serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'update', body: { description: 'new' } },
        ],
      })
    ).body;
    expectStatus(await p.admin.request('POST', requestPath(p, cr.id, 'approve'), {}), 200, 'approve');
    // Moved by someone else meanwhile.
    await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: {} });
    expectStatus(await p.owner.request('PATCH', `/api/flags/${key}${at(p.serviceId)}`, { description: 'moved' }), 200, 'move');
    await protect(p);
    const shown = await p.member.request('GET', requestPath(p, cr.id));
    expect(shown.body.conflicts).toEqual([{ serviceId: p.serviceId, environment: 'production', flagKey: key, baseVersion: 1, currentVersion: 2 }]);
    const applied = await p.member.request('POST', requestPath(p, cr.id, 'apply'));
    expect(applied.status).toBe(409);
    expect(applied.body.code).toBe('CONFLICT');
    const failed = (await p.member.request('GET', requestPath(p, cr.id))).body;
    expect(failed.status).toBe('failed');
    expect(failed.failureReason).toMatch(/^CONFLICT/);
    expect((await flag(p, untouched)).enabled).toBe(false);
    expect((await auditOf(p, 'change_request.fail')).some((e) => e.resourceId === cr.id)).toBe(true);
    await eventually(async () => (await mailbox(p.member.email)).some((m) => m.subject === 'Change request "x" failed'));
  });

  it('lets the author approve their own request only where the policy allows it', async () => {
    const key = await protectedFlag('self');
    await protect(p, { production: { requiredApprovals: 1, approverRoles: ['owner', 'admin', 'member'], allowSelfApproval: true } });
    const cr = (await open(p.member, p, { title: 'mine', changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'toggle', body: { enabled: true } }] })).body;
    expect(cr).toMatchObject({ allowSelfApproval: true, actions: { approve: true } });
    expectStatus(await p.member.request('POST', requestPath(p, cr.id, 'approve'), {}), 200, 'self-approve');
    expectStatus(await p.member.request('POST', requestPath(p, cr.id, 'apply')), 200, 'apply');
    expect((await flag(p, key)).enabled).toBe(true);
    await protect(p);
  });

  it('measures its impact over recent real contexts', async () => {
    const key = await protectedFlag('impact');
    await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: {} });
    expectStatus(await p.owner.request('PATCH', `/api/flags/${key}${at(p.serviceId)}`, { enabled: true, targeting: [{ id: 'pro', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }], value: true }] }), 200, 'rule');
    await protect(p);
    const token = await opaqueToken(p.owner, p.projectId, { read: true });
    await eventually(async () => (await app.request('POST', '/api/flags/evaluate', { token, body: { flagKey: key, serviceId: p.serviceId, environment: 'production' } })).body?.reason === 'DEFAULT');
    for (const [i, plan] of ['pro', 'pro', 'free', 'free', 'free'].entries()) {
      expectStatus(await app.request('POST', '/api/flags/evaluate', { token, body: { flagKey: key, serviceId: p.serviceId, environment: 'production', context: { targetingKey: `u-${i}`, plan } } }), 200, 'evaluate');
    }
    // Widening the rule to every plan changes the answer of the three free users.
    const cr = await open(p.member, p, {
      title: 'everyone',
      changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'update', body: { targeting: [{ id: 'pro', conditions: [], value: true }] } }],
    });
    expectStatus(cr, 201, 'open');
    expect(cr.body.impact).toEqual([{ serviceId: p.serviceId, flagKey: key, environment: 'production', changed: 3, evaluated: 5 }]);
  });

  it('refuses bad input: 1,001 changes, a flag twice, missing flags, other projects', async () => {
    const key = await protectedFlag('input');
    const change = { serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'toggle', body: {} };
    const tooMany = Array.from({ length: 1001 }, (_, i) => ({ ...change, flagKey: `k-${i}` }));
    expect((await open(p.member, p, { title: 'x', changes: tooMany })).status).toBe(400);
    expect((await open(p.member, p, { title: 'x', changes: [change, change] })).status).toBe(400);
    expect((await open(p.member, p, { title: 'x', changes: [{ ...change, flagKey: 'absent-flag' }] })).status).toBe(400);
    expect((await open(p.member, p, { title: 'x', changes: [{ ...change, action: 'update', body: { type: 'nope' } }] })).status).toBe(400);
    expect((await open(p.member, p, { title: 'x', changes: [{ ...change, serviceId: other.serviceId }] })).status).toBe(404);
    expect((await open(p.viewer, p, { title: 'x', changes: [change] })).status).toBe(403);
    expect((await open(other.owner, p, { title: 'x', changes: [change] })).status).toBe(404);
    expect((await open(p.member, p, { title: 'x', changes: [change], scheduledAt: '2001-01-01T00:00:00Z' })).status).toBe(400);
    const cr = (await open(p.member, p, { title: 'x', changes: [change] })).body;
    expect((await other.owner.request('GET', requestPath(p, cr.id))).status).toBe(404);
    expect((await p.owner.request('GET', `/api/projects/${other.projectId}/change-requests/${cr.id}`)).status).toBe(404);
    const readOnly = await personalToken(p.admin, 'read');
    expect((await app.request('POST', requestPath(p, cr.id, 'approve'), { token: readOnly, body: {} })).status).toBe(403);
  });

  it('applies a scheduled request at its time (plain scheduled change without a policy)', async () => {
    await p.owner.request('PUT', `/api/projects/${p.projectId}/change-policy`, { environments: {} });
    const key = newKey('scheduled');
    await createFlag(p.owner, p.serviceId, key);
    const scheduledAt = new Date(Date.now() + 3_000).toISOString();
    const cr = await open(p.member, p, { title: 's', scheduledAt, changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'toggle', body: { enabled: true } }] });
    expectStatus(cr, 201, 'open');
    expect(cr.body).toMatchObject({ status: 'scheduled', scheduledAt, requiredApprovals: 0 });
    await eventually(async () => (await p.member.request('GET', requestPath(p, cr.body.id))).body.status === 'applied', 30_000, 250);
    expect((await flag(p, key)).enabled).toBe(true);
  });

  it('starts a canary in a protected environment only under an approved request of that flag', async () => {
    const key = await protectedFlag('canary');
    const body = {
      serviceId: p.serviceId,
      environment: 'production',
      initialRolloutPercent: 10,
      targetRolloutPercent: 50,
      rampStepPercent: 20,
      soakPeriodMinutes: 30,
      errorRateGateDelta: 0.01,
      latencyGateDeltaMs: 50,
      autoRollbackOnBreach: true,
    };
    const refused = await p.member.request('POST', `/api/flags/${key}/canary`, body);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('APPROVAL_REQUIRED');
    const cr = (await open(p.member, p, { title: 'canary', changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'update', body: { enabled: true } }] })).body;
    expect((await p.member.request('POST', `/api/flags/${key}/canary`, { ...body, changeRequestId: cr.id })).status).toBe(403);
    expectStatus(await p.admin.request('POST', requestPath(p, cr.id, 'approve'), {}), 200, 'approve');
    expectStatus(await p.member.request('POST', requestPath(p, cr.id, 'apply')), 200, 'apply');
    const started = await p.member.request('POST', `/api/flags/${key}/canary`, { ...body, changeRequestId: cr.id });
    expect(started.status).toBe(201);
    const ramped = await flag(p, key);
    expect(ramped.targeting.map((r) => r.rolloutPercentage)).toEqual([10]);
    // Its rollback always passes, even where reductions need approval.
    await protect(p, { production: { requiredApprovals: 1, approverRoles: ['admin'], emergencyReduce: 'approve' } });
    expectStatus(await p.member.request('POST', `/api/flags/${key}/canary/abort`, { serviceId: p.serviceId, environment: 'production', reason: 'done' }), 200, 'abort');
    await eventually(async () => (await flag(p, key)).targeting.length === 0);
    await protect(p);
  });
});

describe('NUL characters', () => {
  it('are refused with 400 naming the field, in a change request as in a flag write', async () => {
    const p = await createProject(app);
    const key = newKey('nul');
    await createFlag(p.owner, p.serviceId, key);
    const request = await open(p.owner, p, { title: 'a\u0000b', changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'update', body: { description: 'x' } }] });
    expect(request.status).toBe(400);
    expect(request.body.details).toEqual([{ path: 'body.title', message: 'must not contain NUL characters' }]);
    const inBody = await open(p.owner, p, { title: 'ok', changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'update', body: { description: 'x\u0000y' } }] });
    expect(inBody.body.details).toEqual([{ path: 'body.changes.0.body.description', message: 'must not contain NUL characters' }]);
    const flag = await p.owner.request('POST', '/api/flags', { key: newKey('nul'), serviceId: p.serviceId, name: 'a\u0000b' });
    expect(flag.status).toBe(400);
    // A backslash followed by u0000 is text, not a NUL.
    expectStatus(await open(p.owner, p, { title: 'a\\u0000b', changes: [{ serviceId: p.serviceId, environment: 'production', flagKey: key, action: 'toggle' }] }), 201, 'escaped backslash');
  });
});
