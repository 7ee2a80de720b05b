import { serialize } from 'cookie';
import type { Response } from 'express';
import { z } from 'zod';
import { actingUser, describeCredential, type Principal } from '../../auth/principal';
import { SESSION_COOKIE, type SessionManager } from '../../auth/sessions';
import { ipBucket } from '../../http/client-ip';
import { notFound } from '../../http/errors';
import { defineRoute, randomToken, reply, type AnyRoute } from '../../http/route';
import type { Sql } from '../../infra/postgres';
import type { AccountService } from './service';
import type { AuthThrottle } from './throttle';

export const UserSchema = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string(),
  emailVerified: z.boolean(),
  createdAt: z.string(),
});

const Credentials = z.object({
  email: z.string().trim().email().max(254),
  password: z.string().min(1).max(1024),
});

export interface AccountRouteDeps {
  accounts: AccountService;
  sessions: SessionManager;
  throttle: AuthThrottle;
  sql: Sql;
  secureCookies: boolean;
  devMailbox: boolean;
}

export function accountRoutes(deps: AccountRouteDeps): AnyRoute[] {
  const setSessionCookie = (res: Response, value: string, expiresAt: Date) =>
    res.append(
      'Set-Cookie',
      serialize(SESSION_COOKIE, value, { httpOnly: true, sameSite: 'lax', secure: deps.secureCookies, path: '/', expires: expiresAt }),
    );

  // Every /api/auth/* route counts against the caller's per-IP (IPv6: per /64) budget first.
  const perIp = (ip: string) => deps.throttle.checkIp(ipBucket(ip));

  return [
    defineRoute({
      method: 'post',
      path: '/api/auth/signup',
      summary: 'Create an account and its personal organization; signs in',
      tags: ['accounts'],
      auth: 'public',
      status: 201,
      csrfExempt: true,
      body: z
        .object({
          email: Credentials.shape.email,
          password: z.string().min(10, 'must be at least 10 characters').max(1024),
          name: z.string().trim().min(1).max(200),
        })
        .strict(),
      response: z.object({ user: UserSchema }),
      async handler({ body, ip, userAgent, res }) {
        await perIp(ip);
        const { user, session } = await deps.accounts.signup(body, { ip, userAgent });
        setSessionCookie(res, session.cookieValue, session.expiresAt);
        return { user };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/login',
      summary: 'Sign in with e-mail and password',
      tags: ['accounts'],
      auth: 'public',
      csrfExempt: true,
      body: Credentials.strict(),
      response: z.object({ user: UserSchema }),
      async handler({ body, ip, userAgent, res }) {
        await perIp(ip);
        const { user, session } = await deps.accounts.login(body, { ip, userAgent });
        setSessionCookie(res, session.cookieValue, session.expiresAt);
        return { user };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/logout',
      summary: 'End the session server-side at once',
      tags: ['accounts'],
      auth: 'session',
      async handler({ principal, ip, res }) {
        await perIp(ip);
        if (principal.type === 'session') await deps.sessions.revoke(principal.sessionId);
        res.append('Set-Cookie', serialize(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'lax', secure: deps.secureCookies, path: '/', maxAge: 0 }));
        return reply(204);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/verify-email',
      summary: 'Confirm an e-mail address with the one-time token from the verification mail',
      tags: ['accounts'],
      auth: 'public',
      csrfExempt: true,
      body: z.object({ token: z.string().min(1).max(512) }).strict(),
      response: z.object({ user: UserSchema }),
      async handler({ body, ip }) {
        await perIp(ip);
        return { user: await deps.accounts.verifyEmail(body.token) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/resend-verification',
      summary: 'Send a new verification mail to the signed-in user (throttled per user and per address)',
      tags: ['accounts'],
      auth: 'session',
      async handler({ principal, ip }) {
        await perIp(ip);
        const user = (principal as Extract<Principal, { type: 'session' }>).user;
        return reply(202, { sent: await deps.accounts.resendVerification(user) });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/users/me',
      summary: 'The caller and the credential presented (a project token: the token only)',
      tags: ['accounts'],
      auth: 'authenticated',
      handler({ principal }) {
        const credential = describeCredential(principal);
        const user = actingUser(principal);
        // A project token acts as no user: it may ship in a browser bundle, so it never reveals its creator.
        return user ? { ...user, credential } : { credential };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/csrf-token',
      summary: 'The CSRF token to send as X-CSRF-Token on cookie-session mutations',
      tags: ['accounts'],
      auth: 'public',
      response: z.object({ token: z.string(), headerName: z.literal('X-CSRF-Token') }),
      handler({ principal }) {
        // Only cookie sessions are checked; anonymous callers get a token that is never needed.
        const token = principal.type === 'session' ? principal.csrfToken : randomToken();
        return reply(200, { token, headerName: 'X-CSRF-Token' }, { 'Cache-Control': 'no-store' });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/dev/mailbox',
      summary: 'Mail kept without SMTP_URL, readable in the embedded profile or with DEV_MAILBOX=on (404 otherwise)',
      tags: ['accounts'],
      auth: 'public',
      query: z.object({ to: z.string().trim().email() }),
      async handler({ query }) {
        if (!deps.devMailbox) throw notFound('Route');
        const rows = await deps.sql<{ to_email: string; subject: string; body: string; token: string | null; created_at: Date }[]>`
          SELECT to_email, subject, body, token, created_at FROM dev_mailbox
          WHERE lower(to_email) = lower(${query.to}) ORDER BY created_at DESC LIMIT 50`;
        return {
          messages: rows.map((r) => ({
            to: r.to_email,
            subject: r.subject,
            text: r.body,
            ...(r.token ? { token: r.token } : {}),
            createdAt: r.created_at.toISOString(),
          })),
        };
      },
    }),
  ];
}
