import express, { type Request, type Response } from 'express';
import type { z } from 'zod';
import { HttpError, forbidden, malformedJson, payloadTooLarge, requestAborted, validationFailed } from '../../http/errors';
import type { RateLimiter } from '../../http/rate-limit';
import { HANDLED, KB, defineRoute, safeEqual, type AnyRoute } from '../../http/route';
import type { SessionPrincipal } from '../../auth/principal';
import type { PersonalTokenService } from '../personal-tokens/service';
import { escapeHtml, hidden, sendPage } from '../../http/html-page';
import { CliLoginBody, CliLoginQuery, type CliLoginRequest } from './request';

/** What a CLI login issues (docs/api-reference.md#cli-login). */
export const CLI_TOKEN_TIER = 'write';
export const CLI_TOKEN_DAYS = 90;
/**
 * Approvals one user may send per rate-limit window: each issues a token (20 live at most,
 * docs/limits.md).
 */
export const CLI_LOGINS_PER_WINDOW = 10;
const BODY_LIMIT = 8 * KB;

export interface CliLoginDeps {
  tokens: PersonalTokenService;
  rateLimiter: RateLimiter;
}

/**
 * The CLI login flow (docs/api-reference.md#cli-login): a signed-in browser approves, the server
 * issues a write personal token and the page hands it to the CLI's loopback listener by form POST
 * (never in a URL). Only dashboard sessions approve; personal and project tokens never do.
 */
export function cliLoginRoutes(deps: CliLoginDeps): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/auth/cli',
      summary: 'The CLI login approval page (HTML) for a signed-in browser; a 401 page that says to sign in without a session',
      tags: ['cli-login'],
      // Public so a browser without a session gets a page that says what to do, not a JSON 401.
      auth: 'public',
      query: CliLoginQuery,
      handler({ principal, query, res }) {
        if (principal.type === 'anonymous') {
          sendPage(res, {
            status: 401,
            title: 'Sign in to approve the CLI login',
            body: '<p>This browser is not signed in to Flagship. Sign in, then open the link the <code>flagship login</code> command printed again.</p>',
          });
        } else if (principal.type !== 'session') {
          sendPage(res, {
            status: 403,
            title: 'A signed-in browser must approve this',
            body: '<p>API tokens cannot approve CLI logins. Open the link the <code>flagship login</code> command printed in a browser signed in to Flagship.</p>',
          });
        } else {
          sendApprovalPage(res, principal, query);
        }
        return HANDLED;
      },
    }),
    defineRoute({
      method: 'post',
      path: '/auth/cli',
      summary: 'Approve a CLI login (session + CSRF; JSON or form body {callback, state, projects: "all"}): an HTML page that posts a new write personal token to the CLI',
      tags: ['cli-login'],
      auth: 'session',
      noPersonalTokens: true,
      // Checked in the handler instead: an HTML form cannot send the header, so it sends a field.
      csrfExempt: true,
      async beforeBody({ principal, res }) {
        const user = (principal as SessionPrincipal).user;
        await deps.rateLimiter.enforce(res, `cli-login:${user.id}`, CLI_LOGINS_PER_WINDOW, 'user for CLI logins');
      },
      async handler({ principal, req, res, ip, log }) {
        const session = principal as SessionPrincipal;
        const fromForm = req.is('application/x-www-form-urlencoded') === 'application/x-www-form-urlencoded';
        try {
          const raw = await readBody(req, res);
          const csrf = req.get('x-csrf-token') ?? (typeof raw.csrfToken === 'string' ? raw.csrfToken : undefined);
          if (!csrf || !safeEqual(session.csrfToken, csrf)) {
            throw forbidden('missing or invalid CSRF token; send the X-CSRF-Token header (or the csrfToken field of the approval form)');
          }
          const parsed = CliLoginBody.safeParse(raw);
          if (!parsed.success) throw validationFailed(parsed.error.issues.map((i) => ({ path: ['body', ...i.path].join('.'), message: i.message })));
          const body = parsed.data;
          const callback = new URL(body.callback);
          const issued = await deps.tokens.create(session.user, {
            name: `CLI login ${new Date().toISOString().slice(0, 10)} (port ${callback.port})`,
            tier: CLI_TOKEN_TIER,
            expiresInDays: CLI_TOKEN_DAYS,
            allowOwnerActions: false,
          });
          // Personal tokens belong to no project, so there is no project audit log to write to:
          // the security log records who approved which token for which listener.
          log.info({ event: 'cli_login.approved', userId: session.user.id, tokenId: issued.token.id, callbackPort: callback.port, ip }, 'CLI login approved');
          sendHandoffPage(res, body, issued.value);
        } catch (error) {
          if (!(fromForm && error instanceof HttpError)) throw error;
          sendPage(res, { status: error.status, title: 'The CLI login failed', body: `<p>${escapeHtml(error.message)}</p>` });
        }
        return HANDLED;
      },
    }),
  ];
}

function sendApprovalPage(res: Response, session: SessionPrincipal, query: z.infer<typeof CliLoginQuery>) {
  const callback = new URL(query.callback);
  sendPage(res, {
    status: 200,
    title: 'Approve the Flagship CLI login',
    formAction: ["'self'", formActionSource(callback)],
    body:
      `<p>The <code>flagship</code> command line on this computer, listening on <code>${escapeHtml(callback.host)}</code>, asks to act as <strong>${escapeHtml(session.user.email)}</strong>.</p>` +
      `<p>It will receive a <strong>${CLI_TOKEN_TIER}</strong> personal access token valid for ${CLI_TOKEN_DAYS} days. You can revoke it with your other personal tokens at any time.</p>` +
      `<form method="post" action="/auth/cli">` +
      `<fieldset><legend>Projects</legend><label><input type="radio" name="projects" value="all" checked> All projects you can access (never beyond your roles)</label></fieldset>` +
      hidden('callback', query.callback) +
      hidden('state', query.state) +
      hidden('csrfToken', session.csrfToken) +
      `<p><button type="submit">Approve</button></p></form>` +
      `<form method="post" action="${escapeHtml(query.callback)}">${hidden('state', query.state)}${hidden('error', 'access_denied')}<button type="submit">Deny</button></form>` +
      `<p>If you did not run <code>flagship login</code> just now, deny or close this tab.</p>`,
  });
}

/** The token goes to the CLI as a form POST body; the script submits it, the button is the fallback. */
function sendHandoffPage(res: Response, body: CliLoginRequest, token: string) {
  sendPage(res, {
    status: 200,
    title: 'Handing the login to the CLI',
    formAction: [formActionSource(new URL(body.callback))],
    body:
      `<form id="handoff" method="post" action="${escapeHtml(body.callback)}">${hidden('token', token)}${hidden('state', body.state)}` +
      `<p>Sending the new token to the CLI… If nothing happens, <button type="submit">continue</button>.</p></form>`,
    script: "document.getElementById('handoff').submit();",
  });
}

/**
 * The CSP form-action source of a callback: its origin, except for [::1], which CSP's host
 * grammar cannot name (browsers drop such a source, blocking the form); then the http: scheme,
 * safe here because the only form targets on these pages are the validated loopback callback.
 */
function formActionSource(callback: URL): string {
  return callback.hostname.startsWith('[') ? 'http:' : callback.origin;
}

const jsonParser = express.json({ limit: BODY_LIMIT, type: () => true, inflate: false });
const formParser = express.urlencoded({ limit: BODY_LIMIT, extended: false, type: () => true, inflate: false });

/** The approval as JSON or as the page's form; an empty body reads as {} (and fails validation). */
function readBody(req: Request, res: Response): Promise<Record<string, unknown>> {
  const type = req.is(['application/json', 'application/x-www-form-urlencoded']);
  if (!req.headers['content-length'] && !req.headers['transfer-encoding']) return Promise.resolve({});
  if (!type) return Promise.reject(new HttpError(415, 'Content-Type must be application/json or application/x-www-form-urlencoded'));
  const parser = type === 'application/json' ? jsonParser : formParser;
  return new Promise((resolve, reject) => {
    parser(req, res, (err?: unknown) => {
      const e = err as { type?: string } | undefined;
      if (e?.type === 'entity.too.large') return reject(payloadTooLarge(BODY_LIMIT));
      if (e?.type === 'entity.parse.failed') return reject(malformedJson());
      if (e?.type === 'request.aborted') return reject(requestAborted());
      if (err) return reject(err);
      const body: unknown = req.body;
      resolve(body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {});
    });
  });
}
