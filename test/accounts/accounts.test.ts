import { AccountStore } from '../../api/features/accounts/store';
import { eventually, startTestApp, type TestApp } from '../support/harness';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.stop());

describe('signup, login, logout', () => {
  it('signs up, reads /api/users/me with the session, and logs out server-side', async () => {
    const email = `Someone-${Date.now()}@Example.com`;
    const signup = await app.request('POST', '/api/auth/signup', { body: { email, password: 'long enough pw', name: 'Someone' } });
    expect(signup.status).toBe(201);
    expect(signup.body.user).toMatchObject({ email, name: 'Someone', emailVerified: false });
    expect(signup.body.user.id).toEqual(expect.any(String));
    const setCookie = signup.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/flags_session=/);
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Lax/i);
    // The harness sets the backend URLs: not the embedded profile, so Secure (test/security/dev-conveniences.test.ts).
    expect(setCookie).toMatch(/;\s*Secure/i);
    const cookie = setCookie.split(';')[0];

    const me = await app.request('GET', '/api/users/me', { cookie });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: signup.body.user.id, email, credential: { type: 'session' } });

    const csrf = (await app.request('GET', '/api/csrf-token', { cookie })).body;
    expect(csrf.headerName).toBe('X-CSRF-Token');
    expect((await app.request('POST', '/api/auth/logout', { cookie })).status).toBe(403);
    const out = await app.request('POST', '/api/auth/logout', { cookie, csrf: csrf.token });
    expect(out.status).toBe(204);
    expect((await app.request('GET', '/api/users/me', { cookie })).status).toBe(401);
  });

  it('refuses a duplicate e-mail (case-insensitive) with 409 and short passwords with 400 details', async () => {
    const user = await app.signup();
    const dup = await app.request('POST', '/api/auth/signup', { body: { email: user.email.toUpperCase(), password: 'long enough pw', name: 'X' } });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ error: 'Conflict', message: expect.any(String) });

    const short = await app.request('POST', '/api/auth/signup', { body: { email: 'short@example.com', password: 'short', name: 'X' } });
    expect(short.status).toBe(400);
    expect(short.body.details).toEqual([{ path: 'body.password', message: expect.stringContaining('10') }]);
  });

  it('logs in with the right password only and issues a fresh session', async () => {
    const user = await app.signup();
    const bad = await app.request('POST', '/api/auth/login', { body: { email: user.email, password: 'wrong password!' } });
    expect(bad.status).toBe(401);
    expect(bad.body.error).toBe('Unauthorized');
    const unknown = await app.request('POST', '/api/auth/login', { body: { email: 'nobody@example.com', password: 'whatever12345' } });
    expect(unknown.status).toBe(401);
    const ok = await app.request('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    expect(ok.status).toBe(200);
    const cookie = ok.headers.get('set-cookie')!.split(';')[0];
    expect(cookie).not.toBe(user.cookie);
    expect((await app.request('GET', '/api/users/me', { cookie })).body.id).toBe(user.id);
    // The earlier session still works: logout ends only the session it is sent with.
    expect((await user.request('GET', '/api/users/me')).status).toBe(200);
  });

  it('stores only a scrypt hash of the password', async () => {
    const user = await app.signup();
    const [row] = await app.platform.db.sql`SELECT password_hash FROM users WHERE id = ${user.id}`;
    expect(row.password_hash).toMatch(/^scrypt\$\d+\$8\$1\$/);
    expect(row.password_hash).not.toContain(user.password);
  });
});

describe('e-mail verification through the dev mailbox', () => {
  it('delivers the verification mail via Temporal and verifies once', async () => {
    const user = await app.signup();
    const mail = await eventually(async () => {
      const res = await app.request('GET', `/api/dev/mailbox?to=${encodeURIComponent(user.email)}`);
      return res.body.messages?.[0];
    });
    expect(mail).toMatchObject({ to: user.email, subject: expect.any(String), token: expect.any(String), createdAt: expect.any(String) });
    const ok = await app.request('POST', '/api/auth/verify-email', { body: { token: mail.token } });
    expect(ok.status).toBe(200);
    expect(ok.body.user.emailVerified).toBe(true);
    expect((await app.request('POST', '/api/auth/verify-email', { body: { token: mail.token } })).status).toBe(400);
    expect((await user.request('GET', '/api/users/me')).body.emailVerified).toBe(true);
  });
});

describe('organizations', () => {
  it('lists the personal org and creates more', async () => {
    const user = await app.signup();
    const list = await user.request('GET', '/api/orgs');
    expect(list.body.orgs).toHaveLength(1);
    expect(list.body.orgs[0]).toMatchObject({ role: 'owner', personal: true });
    const created = await user.request('POST', '/api/orgs', { name: 'Acme' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'Acme', role: 'owner' });
    expect((await user.request('GET', '/api/orgs')).body.orgs).toHaveLength(2);
    expect((await app.request('GET', '/api/orgs')).status).toBe(401);
  });
});

describe('CSRF', () => {
  it('refuses a cookie-session mutation without or with a wrong token', async () => {
    const user = await app.signup();
    const none = await app.request('POST', '/api/orgs', { cookie: user.cookie, body: { name: 'x' } });
    expect(none.status).toBe(403);
    expect(none.body.message).toMatch(/^Forbidden: .*CSRF/);
    const wrong = await app.request('POST', '/api/orgs', { cookie: user.cookie, csrf: 'nope', body: { name: 'x' } });
    expect(wrong.status).toBe(403);
  });
});

describe('session expiry', () => {
  it('refuses an expired session and purges expired rows', async () => {
    const user = await app.signup();
    await app.platform.db.sql`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE user_id = ${user.id}`;
    expect((await user.request('GET', '/api/users/me')).status).toBe(401);
    const purged = await new AccountStore().purgeExpired(app.platform.db.sql);
    expect(purged.sessions).toBeGreaterThanOrEqual(1);
    const [{ n }] = await app.platform.db.sql`SELECT count(*)::int AS n FROM sessions WHERE user_id = ${user.id}`;
    expect(n).toBe(0);
  });
});
