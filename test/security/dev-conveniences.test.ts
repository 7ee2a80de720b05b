import { parseConfig } from '../../api/config';
import { startTestApp, type TestApp } from '../support/harness';

/**
 * Development conveniences (dev mailbox, private webhook targets, cookies without Secure)
 * follow the embedded profile, not NODE_ENV: with any backend URL set they are off unless a
 * variable switches them on by name. The harness sets all four backend URLs.
 */

describe('configuration', () => {
  const backends = { DATABASE_URL: 'postgres://db/x', REDIS_URL: 'redis://cache:6379', CLICKHOUSE_URL: 'http://ch:8123', TEMPORAL_ADDRESS: 'temporal:7233' };

  it('has them on in the embedded profile, whatever NODE_ENV says', () => {
    for (const NODE_ENV of ['development', 'test']) {
      expect(parseConfig({ NODE_ENV })).toMatchObject({ embedded: true, devMailbox: true, allowPrivateTargets: true, secureCookies: false });
    }
  });

  it.each(Object.entries(backends))('turns them off when %s is set, even outside NODE_ENV=production', (name, value) => {
    for (const NODE_ENV of ['development', 'test']) {
      expect(parseConfig({ NODE_ENV, [name]: value })).toMatchObject({ embedded: false, devMailbox: false, allowPrivateTargets: false, secureCookies: true });
    }
  });

  it('switches each on by name', () => {
    const config = parseConfig({ ...backends, DEV_MAILBOX: 'on', ALLOW_PRIVATE_WEBHOOK_TARGETS: 'on', INSECURE_COOKIES: 'on' });
    expect(config).toMatchObject({ devMailbox: true, allowPrivateTargets: true, secureCookies: false });
    expect(parseConfig({ DEV_MAILBOX: 'off', ALLOW_PRIVATE_WEBHOOK_TARGETS: 'off' })).toMatchObject({ devMailbox: false, allowPrivateTargets: false });
  });
});

describe('with the backend URLs set and nothing enabled', () => {
  let app: TestApp;
  beforeAll(async () => {
    // Empty means unset: the harness's own DEV_MAILBOX / ALLOW_PRIVATE_WEBHOOK_TARGETS are dropped.
    app = await startTestApp({ NODE_ENV: 'development', DEV_MAILBOX: '', ALLOW_PRIVATE_WEBHOOK_TARGETS: '' });
  });
  afterAll(() => app?.stop());

  it('answers 404 for the dev mailbox', async () => {
    const user = await app.signup();
    const res = await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(user.email)}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'Not Found', message: expect.any(String) });
  });

  it('refuses webhooks and alert channels to private targets', async () => {
    const owner = await app.signup({ verified: true });
    const project = await owner.request('POST', '/api/projects', { name: 'Conveniences' });
    expect(project.status).toBe(201);
    const hook = await owner.request('POST', '/api/webhooks', { projectId: project.body.id, url: 'http://127.0.0.1:9/hook' });
    expect(hook.status).toBe(400);
    expect(hook.body.message).toMatch(/loopback/);
    const orgId = project.body.orgId;
    const channel = await owner.request('POST', `/api/orgs/${orgId}/alert-channels`, { type: 'webhook', name: 'local', url: 'http://10.0.0.5/hook' });
    expect(channel.status).toBe(400);
  });

  it('sets Secure on the session cookie', async () => {
    const res = await app.request('POST', '/api/auth/signup', { body: { email: `secure-${Date.now()}@example.com`, password: 'long enough pw', name: 'S' } });
    expect(res.status).toBe(201);
    expect(res.headers.get('set-cookie')).toMatch(/;\s*Secure/i);
  });
});

describe('with the backend URLs set and the conveniences enabled by name', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ DEV_MAILBOX: 'on', ALLOW_PRIVATE_WEBHOOK_TARGETS: 'on', INSECURE_COOKIES: 'on' });
  });
  afterAll(() => app?.stop());

  it('serves the dev mailbox, accepts a loopback webhook and leaves Secure off', async () => {
    const owner = await app.signup({ verified: true });
    expect((await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(owner.email)}`)).status).toBe(200);
    const project = await owner.request('POST', '/api/projects', { name: 'Enabled' });
    const hook = await owner.request('POST', '/api/webhooks', { projectId: project.body.id, url: 'http://127.0.0.1:9/hook' });
    expect(hook.status).toBe(201);
    const res = await app.request('POST', '/api/auth/signup', { body: { email: `plain-${Date.now()}@example.com`, password: 'long enough pw', name: 'P' } });
    expect(res.headers.get('set-cookie')).not.toMatch(/Secure/i);
  });
});
