import { startTestApp, type TestApp } from '../support/harness';
import { createFlag, createProject, expectStatus, qs, type Project } from '../webhooks/support';

/**
 * The optional `reason` of POST /api/flags/{key}/toggle (docs/api-reference.md#flags): kept as the
 * toggle's audit `metadata.reason`; a bad one is a 400 in the error envelope that toggles nothing.
 */

let app: TestApp;
let project: Project;
beforeAll(async () => {
  app = await startTestApp();
  project = await createProject(app);
});
afterAll(() => app?.stop());

let counter = 0;
const uniqueKey = () => `toggle-reason-${++counter}-${Date.now().toString(36)}`;
const toggleUrl = (key: string, environment = 'production') => `/api/flags/${key}/toggle${qs({ serviceId: project.serviceId, environment })}`;

async function toggleEntries(key: string) {
  const res = await project.owner.request('GET', `/api/audit${qs({ projectId: project.projectId, action: 'flag.toggle' })}`);
  expectStatus(res, 200, 'read audit');
  return (res.body.logs as { resourceName: string; metadata: Record<string, unknown> }[]).filter((entry) => entry.resourceName === key);
}

async function enabledNow(key: string) {
  const res = await project.owner.request('GET', `/api/flags/${key}${qs({ serviceId: project.serviceId, environment: 'production' })}`);
  expectStatus(res, 200, 'read flag');
  return { enabled: res.body.enabled as boolean, version: res.body.version as number };
}

describe('POST /api/flags/{key}/toggle with a reason', () => {
  it('stores the trimmed reason as metadata.reason of the flag.toggle audit entry', async () => {
    const key = uniqueKey();
    await createFlag(project.owner, project.serviceId, key);
    const res = await project.member.request('POST', toggleUrl(key), { enabled: true, reason: '  checkout errors spiking, killing it  ' });
    expectStatus(res, 200, 'toggle');
    expect(res.body.enabled).toBe(true);
    const [entry] = await toggleEntries(key);
    expect(entry.metadata).toMatchObject({ reason: 'checkout errors spiking, killing it', environment: 'production' });
  });

  it('records no reason when none is given', async () => {
    const key = uniqueKey();
    await createFlag(project.owner, project.serviceId, key);
    expectStatus(await project.owner.request('POST', toggleUrl(key), { enabled: true }), 200, 'toggle');
    const [entry] = await toggleEntries(key);
    expect(entry.metadata).not.toHaveProperty('reason');
  });

  it('refuses a reason over 500 characters, a non-string or a NUL with a 400 that toggles nothing', async () => {
    const key = uniqueKey();
    await createFlag(project.owner, project.serviceId, key);
    const before = await enabledNow(key);
    expectStatus(await project.owner.request('POST', toggleUrl(key), { enabled: true, reason: 'x'.repeat(500) }), 200, '500 characters are allowed');
    const allowed = await enabledNow(key);
    for (const reason of ['y'.repeat(501), 42, 'stop\u0000now']) {
      const res = await project.owner.request('POST', toggleUrl(key), { enabled: false, reason });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'Bad Request' });
    }
    expect(await enabledNow(key)).toEqual(allowed);
    expect(allowed.version).toBe(before.version + 1);
    expect(await toggleEntries(key)).toHaveLength(1);
  });

  it('does not let a viewer or another project toggle with a reason', async () => {
    const key = uniqueKey();
    await createFlag(project.owner, project.serviceId, key);
    const viewer = await project.viewer.request('POST', toggleUrl(key), { enabled: true, reason: 'viewer' });
    expect(viewer.status).toBe(403);
    const outsider = await app.signup({ verified: true });
    const other = await outsider.request('POST', toggleUrl(key), { enabled: true, reason: 'outsider' });
    expect([403, 404]).toContain(other.status);
    expect((await enabledNow(key)).enabled).toBe(false);
    expect(await toggleEntries(key)).toHaveLength(0);
  });
});
