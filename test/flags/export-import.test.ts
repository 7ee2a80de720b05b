import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { addService, createProjectFixture, projectToken, query, type ProjectFixture } from './fixtures';

let app: TestApp;
let fx: ProjectFixture;
let other: ProjectFixture;
let owner: TestUser;
/** A second service of the exporting project, for per-service export. */
let secondService: string;

const RICH_FLAG = {
  key: 'checkout-redesign',
  name: 'Checkout redesign',
  description: 'New checkout flow',
  type: 'string',
  defaultValue: 'control',
  tags: ['web', 'q3'],
  isPublic: true,
  variants: [
    { name: 'control', value: 'control', weight: 50 },
    { name: 'treatment', value: 'treatment', weight: 50 },
  ],
  targeting: [{ id: 'beta-users', conditions: [{ property: 'plan', operator: 'equals', value: 'beta' }], value: 'treatment', rolloutPercentage: 40 }],
};

beforeAll(async () => {
  app = await startTestApp();
  fx = await createProjectFixture(app, 'Exporter');
  other = await createProjectFixture(app, 'Importer');
  owner = fx.owner;
  secondService = await addService(owner, fx.projectId, 'billing');
  const created = await owner.request('POST', '/api/flags/bulk', {
    flags: [
      { ...RICH_FLAG, serviceId: fx.serviceId },
      { key: 'dark-mode', serviceId: fx.serviceId, environment: 'development', enabled: true },
      { key: 'invoice-v2', serviceId: secondService, environment: 'production', type: 'number', defaultValue: 2 },
    ],
  });
  if (created.status !== 201) throw new Error(`setup failed: ${created.status} ${created.text}`);
});
afterAll(() => app?.stop());

async function exportFile(params: Record<string, string | undefined> = {}, user: TestUser = owner) {
  return user.request('GET', `/api/flags/export${query({ projectId: fx.projectId, ...params })}`);
}

async function versionCount(projectId: string) {
  const [{ n }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flag_versions WHERE project_id = ${projectId}`;
  return n;
}

describe('GET /api/flags/export', () => {
  it('downloads every flag of the project as a version 1.0 JSON attachment', async () => {
    const res = await exportFile({ format: 'json' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="flags-.+\.json"$/);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(res.body).toMatchObject({ version: '1.0', projectId: fx.projectId, flagCount: 5, includeDisabled: true });
    expect(new Date(res.body.exportedAt).toString()).not.toBe('Invalid Date');
    expect(res.body.flags).toHaveLength(5);
    const redesign = res.body.flags.find((f: { key: string; environment: string }) => f.key === 'checkout-redesign' && f.environment === 'development');
    expect(redesign).toMatchObject({ ...RICH_FLAG, serviceId: fx.serviceId, environment: 'development' });
    expect(res.body.services).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: fx.serviceId, slug: 'checkout' }), expect.objectContaining({ id: secondService, slug: 'billing' })]),
    );
  });

  it('filters by service and environment, and leaves disabled flags out with includeDisabled=false', async () => {
    const byService = await exportFile({ serviceId: secondService });
    expect(byService.body.flags.map((f: { key: string }) => f.key)).toEqual(['invoice-v2']);
    expect(byService.body.services).toEqual([expect.objectContaining({ id: secondService })]);
    const byEnv = await exportFile({ environment: 'production' });
    expect(byEnv.body.flagCount).toBe(2);
    const enabledOnly = await exportFile({ includeDisabled: 'false' });
    expect(enabledOnly.body.flags.map((f: { key: string }) => f.key)).toEqual(['dark-mode']);
    expect(enabledOnly.body).toMatchObject({ flagCount: 1, includeDisabled: false });
  });

  it('needs flags read on the project: viewers and read tokens may, strangers and anonymous callers may not', async () => {
    expect((await exportFile({}, fx.users.viewer)).status).toBe(200);
    const readToken = await projectToken(owner, fx.projectId, { read: true });
    expect((await app.request('GET', `/api/flags/export${query({ projectId: fx.projectId })}`, { token: readToken })).status).toBe(200);
    expect((await app.request('GET', `/api/flags/export${query({ projectId: fx.projectId })}`)).status).toBe(401);
    const stranger = await exportFile({}, other.owner);
    expect(stranger.status).toBe(404);
    expect(stranger.body.flags).toBeUndefined();
    // A service of another project named with one's own project: not found, nothing exported.
    const crossed = await exportFile({ serviceId: other.serviceId });
    expect(crossed.status).toBe(404);
    const otherToken = await projectToken(other.owner, other.projectId, { read: true });
    expect((await app.request('GET', `/api/flags/export${query({ projectId: fx.projectId })}`, { token: otherToken })).status).toBe(404);
  });

  it('validates the query', async () => {
    expect((await owner.request('GET', '/api/flags/export')).status).toBe(400);
    expect((await exportFile({ format: 'csv' })).status).toBe(400);
    expect((await exportFile({ includeDisabled: 'yes' })).status).toBe(400);
  });
});

describe('POST /api/flags/import', () => {
  it('re-importing an unchanged export changes nothing: every flag skipped, no new versions', async () => {
    const file = (await exportFile()).body;
    const versionsBefore = await versionCount(fx.projectId);
    const res = await owner.request('POST', '/api/flags/import', file);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, projectId: fx.projectId, total: 5, created: 0, updated: 0, skipped: 5, failed: 0 });
    expect(res.body.results.every((r: { status: string }) => r.status === 'skipped')).toBe(true);
    expect(await versionCount(fx.projectId)).toBe(versionsBefore);
  });

  it('restores changed flags (updated), recreates deleted ones (created) and is idempotent afterwards', async () => {
    const file = (await exportFile()).body;
    const ref = query({ serviceId: fx.serviceId, environment: 'development' });
    expect((await owner.request('PATCH', `/api/flags/checkout-redesign${ref}`, { name: 'Changed', targeting: [] })).status).toBe(200);
    expect((await owner.request('DELETE', `/api/flags/dark-mode${ref}`)).status).toBe(204);

    const res = await owner.request('POST', '/api/flags/import', file);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total: 5, created: 1, updated: 1, skipped: 3, failed: 0 });
    expect(res.body.results).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ key: 'checkout-redesign', environment: 'development', status: 'updated', version: 3 }),
        expect.objectContaining({ key: 'dark-mode', environment: 'development', status: 'created', version: 1 }),
      ]),
    );
    const restored = await owner.request('GET', `/api/flags/checkout-redesign${ref}`);
    expect(restored.body).toMatchObject({ name: 'Checkout redesign', targeting: RICH_FLAG.targeting, variants: RICH_FLAG.variants });
    expect((await owner.request('GET', `/api/flags/dark-mode${ref}`)).body).toMatchObject({ enabled: true });
    const audit = await app.platform.db.sql`SELECT metadata FROM audit_logs WHERE resource_name = 'dark-mode' AND action = 'flag.create' ORDER BY timestamp DESC LIMIT 1`;
    expect(audit[0].metadata).toMatchObject({ via: 'import' });

    const versionsBefore = await versionCount(fx.projectId);
    const again = await owner.request('POST', '/api/flags/import', file);
    expect(again.body).toMatchObject({ created: 0, updated: 0, skipped: 5, failed: 0 });
    expect(await versionCount(fx.projectId)).toBe(versionsBefore);
  });

  it('leaves existing flags alone with overwrite=false', async () => {
    const file = (await exportFile({ serviceId: fx.serviceId, environment: 'staging' })).body;
    const ref = query({ serviceId: fx.serviceId, environment: 'staging' });
    expect((await owner.request('PATCH', `/api/flags/checkout-redesign${ref}`, { description: 'kept' })).status).toBe(200);
    const res = await owner.request('POST', '/api/flags/import?overwrite=false', file);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ updated: 0, skipped: 1 });
    expect((await owner.request('GET', `/api/flags/checkout-redesign${ref}`)).body.description).toBe('kept');
  });

  it('imports into another project, mapping services by slug or into ?serviceId, idempotently', async () => {
    const file = (await exportFile({ serviceId: fx.serviceId })).body;
    const res = await other.owner.request('POST', `/api/flags/import${query({ projectId: other.projectId })}`, file);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ projectId: other.projectId, total: 4, created: 4, failed: 0 });
    expect(res.body.results.every((r: { serviceId: string }) => r.serviceId === other.serviceId)).toBe(true);
    const copy = await other.owner.request('GET', `/api/flags/checkout-redesign${query({ serviceId: other.serviceId, environment: 'development' })}`);
    expect(copy.body).toMatchObject({ ...RICH_FLAG, projectId: other.projectId, serviceId: other.serviceId, version: 1 });
    const again = await other.owner.request('POST', `/api/flags/import${query({ projectId: other.projectId })}`, file);
    expect(again.body).toMatchObject({ created: 0, updated: 0, skipped: 4 });

    const target = await addService(other.owner, other.projectId, 'landing');
    const into = await other.owner.request('POST', `/api/flags/import${query({ projectId: other.projectId, serviceId: target })}`, file);
    expect(into.body).toMatchObject({ created: 4 });
    expect(into.body.results.every((r: { serviceId: string }) => r.serviceId === target)).toBe(true);

    // The billing service has no twin in the other project: those flags fail alone (404), nothing leaks.
    const billing = (await exportFile({ serviceId: secondService })).body;
    const unmapped = await other.owner.request('POST', `/api/flags/import${query({ projectId: other.projectId })}`, billing);
    expect(unmapped.status).toBe(404);
    expect(unmapped.body).toMatchObject({ error: 'Not Found', failed: 1, results: [expect.objectContaining({ status: 'failed', statusCode: 404 })] });
  });

  it('reports invalid flags per flag (207) and creates the valid ones', async () => {
    const file = {
      version: '1.0',
      projectId: fx.projectId,
      flags: [
        { key: 'imported-ok', serviceId: fx.serviceId, environment: 'production', type: 'boolean', defaultValue: true },
        { key: 'imported-bad', serviceId: fx.serviceId, environment: 'production', type: 'number', defaultValue: 'NaN' },
        { key: 'no-env', serviceId: fx.serviceId },
        { key: 'bad-op', serviceId: fx.serviceId, environment: 'production', targeting: [{ conditions: [{ property: 'a', operator: 'like', value: 1 }], value: true }] },
      ],
    };
    const res = await owner.request('POST', '/api/flags/import', file);
    expect(res.status).toBe(207);
    expect(res.body).toMatchObject({ total: 4, created: 1, failed: 3 });
    expect(res.body.results.map((r: { status: string; statusCode?: number }) => r.statusCode ?? r.status)).toEqual(['created', 400, 400, 400]);
  });

  it('refuses a file of another version, a truncated file and a malformed body with 400, changing nothing', async () => {
    const file = (await exportFile()).body;
    const versionsBefore = await versionCount(fx.projectId);
    const wrongVersion = await owner.request('POST', '/api/flags/import', { ...file, version: '2.0', flags: [{ ...file.flags[0], name: 'x' }], flagCount: 1 });
    expect(wrongVersion.status).toBe(400);
    expect(wrongVersion.body.details).toEqual([expect.objectContaining({ path: 'body.version' })]);
    expect((await owner.request('POST', '/api/flags/import', { ...file, version: undefined })).status).toBe(400);
    const truncated = await owner.request('POST', '/api/flags/import', { ...file, flags: file.flags.slice(1) });
    expect(truncated.status).toBe(400);
    expect(truncated.body.details).toEqual([expect.objectContaining({ path: 'body.flagCount' })]);
    expect((await owner.request('POST', '/api/flags/import', { ...file, surprise: true })).status).toBe(400);
    expect((await owner.request('POST', '/api/flags/import', [])).status).toBe(400);
    const noTarget = await owner.request('POST', '/api/flags/import', { version: '1.0', flags: [] });
    expect(noTarget.status).toBe(400);
    expect(await versionCount(fx.projectId)).toBe(versionsBefore);
  });

  it('needs flags write on the target project: viewers get 403, strangers 404, anonymous callers 401', async () => {
    const file = (await exportFile()).body;
    const changed = { ...file, flags: file.flags.map((f: Record<string, unknown>) => ({ ...f, description: 'hijacked' })) };
    const viewer = await fx.users.viewer.request('POST', '/api/flags/import', changed);
    expect(viewer.status).toBe(403);
    expect(viewer.body.message).toBe("Forbidden: You need 'write' permission");
    const stranger = await other.owner.request('POST', '/api/flags/import', changed);
    expect(stranger.status).toBe(404);
    expect((await app.request('POST', '/api/flags/import', { body: changed })).status).toBe(401);
    expect((await app.request('POST', '/api/flags/import', { body: changed, cookie: owner.cookie })).status).toBe(403);
    const readToken = await projectToken(owner, fx.projectId, { read: true });
    expect((await app.request('POST', '/api/flags/import', { body: changed, token: readToken })).status).toBe(403);
    // A target service in another project is not reachable through one's own project.
    const crossed = await owner.request('POST', `/api/flags/import${query({ serviceId: other.serviceId })}`, changed);
    expect(crossed.status).toBe(404);
    const [{ n }] = await app.platform.db.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM flags WHERE description = 'hijacked'`;
    expect(n).toBe(0);

    const member = await fx.users.member.request('POST', '/api/flags/import', changed);
    expect(member.status).toBe(200);
    expect(member.body.updated).toBeGreaterThan(0);
  });
});
