import { startTestApp, type TestApp, type TestUser } from '../support/harness';
import { createOpaque, createPersonalToken, createProject } from '../tokens/support';
import { CLI_LOGINS_PER_WINDOW } from '../../api/features/cli-login/routes';
import { formOf } from './support';

let app: TestApp;
let user: TestUser;

beforeAll(async () => {
  app = await startTestApp();
  user = await app.signup({ verified: true });
});
afterAll(() => app?.stop());

const CALLBACK = 'http://127.0.0.1:45678/callback';
const STATE = 'state-0123456789abcdef';
const query = (callback = CALLBACK, state = STATE) => `/auth/cli?callback=${encodeURIComponent(callback)}&state=${encodeURIComponent(state)}`;
const approval = { callback: CALLBACK, state: STATE, projects: 'all' };

async function liveTokenCount(u: TestUser): Promise<number> {
  const [{ n }] = await app.platform.db.sql`SELECT count(*)::int AS n FROM personal_tokens WHERE user_id = ${u.id} AND revoked_at IS NULL`;
  return n;
}

function expectLockedDownPage(headers: Headers) {
  expect(headers.get('content-type')).toMatch(/^text\/html/);
  const csp = headers.get('content-security-policy')!;
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).not.toContain('unsafe-inline');
  expect(headers.get('x-frame-options')).toBe('DENY');
  expect(headers.get('cache-control')).toBe('no-store');
}

describe('GET /auth/cli', () => {
  it('shows a signed-in user the callback, the all-projects choice and a form carrying the CSRF token', async () => {
    const res = await user.request('GET', query());
    expect(res.status).toBe(200);
    expectLockedDownPage(res.headers);
    expect(res.headers.get('content-security-policy')).toContain("form-action 'self' http://127.0.0.1:45678");
    expect(res.text).toContain('127.0.0.1:45678');
    expect(res.text).toContain(user.email);
    expect(res.text).toMatch(/<input type="radio" name="projects" value="all" checked>/);
    const form = formOf(res.text);
    expect(form).toEqual({ action: '/auth/cli', fields: { callback: CALLBACK, state: STATE, csrfToken: user.csrf } });
  });

  it('answers a browser without a session with a 401 page that says to sign in', async () => {
    const res = await app.request('GET', query());
    expect(res.status).toBe(401);
    expectLockedDownPage(res.headers);
    expect(res.text).toMatch(/Sign in/);
    expect(res.text).not.toContain('<form');
  });

  it('refuses personal and project tokens with a 403 page', async () => {
    const pat = await createPersonalToken(user, { tier: 'admin' });
    const projectToken = await createOpaque(user, await createProject(user), { read: true, write: true });
    for (const token of [pat.value, projectToken.value]) {
      const res = await app.request('GET', query(), { token });
      expect(res.status).toBe(403);
      expectLockedDownPage(res.headers);
      expect(res.text).not.toContain('<form');
    }
  });

  it.each([
    ['https', 'https://127.0.0.1:45678/cb'],
    ['another host', 'http://evil.example:45678/cb'],
    ['a look-alike host', 'http://127.0.0.1.evil.example:45678/cb'],
    ['no port', 'http://127.0.0.1/cb'],
    ['credentials', 'http://user:pw@127.0.0.1:45678/cb'],
    ['javascript:', 'javascript:alert(1)'],
    ['a relative path', '/relative'],
    ['over 2048 characters', `http://127.0.0.1:45678/${'a'.repeat(2100)}`],
  ])('refuses a callback with %s (400)', async (_label, callback) => {
    const res = await user.request('GET', query(callback));
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/callback/);
  });

  it('accepts localhost and [::1] callbacks, and refuses a short or odd state', async () => {
    expect((await user.request('GET', query('http://localhost:9/x'))).status).toBe(200);
    expect((await user.request('GET', query('http://[::1]:9/x?y=1'))).status).toBe(200);
    expect((await user.request('GET', query(CALLBACK, 'short'))).status).toBe(400);
    expect((await user.request('GET', query(CALLBACK, `${STATE}<script>`))).status).toBe(400);
    expect((await user.request('GET', `/auth/cli?callback=${encodeURIComponent(CALLBACK)}`)).status).toBe(400);
  });
});

describe('POST /auth/cli', () => {
  it('issues a write personal token for 90 days and hands it to the callback by an auto-submitting form POST', async () => {
    const before = await liveTokenCount(user);
    const res = await user.request('POST', '/auth/cli', approval);
    expect(res.status).toBe(200);
    expectLockedDownPage(res.headers);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain('form-action http://127.0.0.1:45678');
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)![1];
    expect(res.text).toContain(`<script nonce="${nonce}">document.getElementById('handoff').submit();</script>`);
    // The token goes in the POST body, never in the target URL.
    const form = formOf(res.text, 'handoff');
    expect(form.action).toBe(CALLBACK);
    expect(res.text).toMatch(/<form id="handoff" method="post"/);
    expect(form.fields.state).toBe(STATE);
    expect(form.fields.token).toMatch(/^fgp_[0-9a-f]{64}$/);
    expect(await liveTokenCount(user)).toBe(before + 1);

    const me = await app.request('GET', '/api/users/me', { token: form.fields.token });
    expect(me.status).toBe(200);
    expect(me.body.credential).toMatchObject({ type: 'personal_access_token', tier: 'write', allowOwnerActions: false });
    const listed = (await user.request('GET', '/api/users/me/personal-tokens')).body.tokens.find((t: { id: string }) => t.id === me.body.credential.id);
    expect(listed).toMatchObject({ tier: 'write', expiresInDays: 90, lastFour: form.fields.token.slice(-4) });
    expect(listed.name).toMatch(/^CLI login \d{4}-\d{2}-\d{2} \(port 45678\)$/);
  });

  it('accepts the approval page form (form-encoded, CSRF in a field)', async () => {
    const page = formOf((await user.request('GET', query('http://[::1]:5000/cb'))).text);
    const res = await app.request('POST', page.action, {
      cookie: user.cookie,
      rawBody: new URLSearchParams({ ...page.fields, projects: 'all' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(200);
    const handoff = formOf(res.text, 'handoff');
    expect(handoff.action).toBe('http://[::1]:5000/cb');
    // CSP cannot name an IPv6 literal: the scheme stands in for it.
    expect(res.headers.get('content-security-policy')).toContain('form-action http:;');
    expect(handoff.fields.token).toMatch(/^fgp_/);
  });

  it('refuses without the CSRF token (header or field) and issues nothing', async () => {
    const before = await liveTokenCount(user);
    const noHeader = await app.request('POST', '/auth/cli', { cookie: user.cookie, body: approval });
    expect(noHeader.status).toBe(403);
    expect(noHeader.body.message).toMatch(/CSRF/);
    const wrongField = await app.request('POST', '/auth/cli', {
      cookie: user.cookie,
      rawBody: new URLSearchParams({ ...approval, csrfToken: 'not-the-token' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(wrongField.status).toBe(403);
    expect(wrongField.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await liveTokenCount(user)).toBe(before);
  });

  it('refuses personal tokens, project tokens and anonymous callers', async () => {
    const pat = await createPersonalToken(user, { tier: 'admin' });
    const before = await liveTokenCount(user);
    expect((await app.request('POST', '/auth/cli', { token: pat.value, body: approval })).status).toBe(403);
    const projectToken = await createOpaque(user, await createProject(user), { read: true, write: true });
    expect((await app.request('POST', '/auth/cli', { token: projectToken.value, body: approval })).status).toBe(403);
    expect((await app.request('POST', '/auth/cli', { body: approval })).status).toBe(401);
    expect(await liveTokenCount(user)).toBe(before);
  });

  it('refuses a non-loopback callback, a bad state or another project choice with 400 and issues nothing', async () => {
    const before = await liveTokenCount(user);
    for (const body of [
      { ...approval, callback: 'https://evil.example/cb' },
      { ...approval, callback: 'http://10.0.0.1:45678/cb' },
      { ...approval, state: 'x' },
      { ...approval, projects: 'p_123' },
      { callback: CALLBACK, state: STATE },
      { ...approval, extra: true },
    ]) {
      const res = await user.request('POST', '/auth/cli', body);
      expect(res.status).toBe(400);
    }
    expect(await liveTokenCount(user)).toBe(before);
  });

  it('refuses malformed, oversized and other-typed bodies', async () => {
    // Its own user: every approval attempt counts against the per-user budget.
    const user = await app.signup({ verified: true });
    expect((await user.request('POST', '/auth/cli', undefined, { rawBody: '{"callback":', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    const huge = await user.request('POST', '/auth/cli', { ...approval, state: 'a'.repeat(20_000) });
    expect(huge.status).toBe(413);
    const xml = await user.request('POST', '/auth/cli', undefined, { rawBody: '<a/>', headers: { 'content-type': 'application/xml' } });
    expect(xml.status).toBe(415);
  });

  it('needs a verified e-mail address, as every personal token does', async () => {
    const unverified = await app.signup();
    const res = await unverified.request('POST', '/auth/cli', approval);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('EMAIL_NOT_VERIFIED');
    expect(await liveTokenCount(unverified)).toBe(0);
  });

  it(`allows ${CLI_LOGINS_PER_WINDOW} approvals per user and window, then 429`, async () => {
    const busy = await app.signup({ verified: true });
    for (let i = 0; i < CLI_LOGINS_PER_WINDOW; i++) await app.platform.rateLimiter.consume(`cli-login:${busy.id}`, CLI_LOGINS_PER_WINDOW);
    const res = await busy.request('POST', '/auth/cli', approval);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBeTruthy();
    expect(await liveTokenCount(busy)).toBe(0);
  });
});
