import { InvalidRequestError, OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthMetadata, OAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import express, { type Request, type Response } from 'express';
import { z } from 'zod';
import type { BearerResolver } from '../../auth/authenticator';
import { actingUser } from '../../auth/principal';
import { badRequest, HttpError } from '../../http/errors';
import { ipBucket } from '../../http/client-ip';
import type { RateLimiter } from '../../http/rate-limit';
import { defineRoute, HANDLED, KB, reply, type AnyRoute } from '../../http/route';
import { idSchema } from '../projects/common';
import { sendPage } from '../../http/html-page';
import { consentPage, signInPage } from './consent-page';
import {
  authorizationRequestSchema,
  ClientMetadataError,
  CONNECTOR_TOKEN_PREFIX,
  MAX_CONSENT_PROJECTS,
  RedirectableError,
  UntrustedRedirectError,
  type AuthorizationRequest,
  type OAuthService,
} from './service';

export interface OAuthRouteDeps {
  oauth: OAuthService;
  rateLimiter: RateLimiter;
  /** PUBLIC_BASE_URL; without it the issuer is the address the request came to (development, tests). */
  publicBaseUrl: string | undefined;
  /** Client registrations per IP address per rate-limit window. */
  registrationsPerWindow: number;
}

export const MCP_PATH = '/mcp';
export const SCOPES = ['read', 'write'];

/** The issuer and resource base: PUBLIC_BASE_URL, else the scheme and host the request used. */
export function baseUrlOf(req: Request, publicBaseUrl: string | undefined): string {
  return (publicBaseUrl ?? `${req.protocol}://${req.get('host')}`).replace(/\/+$/, '');
}

/** RFC 9728 metadata of the MCP endpoint, where the 401's WWW-Authenticate points. */
export const protectedResourceMetadataUrl = (base: string) => `${base}/.well-known/oauth-protected-resource${MCP_PATH}`;

/** `Authorization: Bearer mcp_…` (docs/api-reference.md#connector-tokens). */
export function connectorTokenResolver(oauth: OAuthService): BearerResolver {
  return { accepts: (token) => token.startsWith(CONNECTOR_TOKEN_PREFIX), resolve: (token) => oauth.resolve(token) };
}

const consentBody = authorizationRequestSchema.extend({
  projectIds: z.array(idSchema).max(MAX_CONSENT_PROJECTS),
  approve: z.boolean(),
});

/** What answers about metadata documents: public, and cacheable only when the issuer is configured. */
const metadataHeaders = (publicBaseUrl: string | undefined) => ({ 'Cache-Control': publicBaseUrl ? 'public, max-age=3600' : 'no-store' });

/**
 * OAuth 2.1 for MCP clients (docs/api-reference.md#oauth-and-mcp): metadata (RFC 9728, RFC 8414),
 * dynamic registration (RFC 7591), the authorization endpoint serving the consent page, the JSON
 * consent API it uses, the token endpoint, and the user's connections. Protocol endpoints answer
 * RFC errors (`{error, error_description}`); the JSON APIs for the page answer the envelope of
 * docs/errors.md.
 */
export function oauthRoutes(deps: OAuthRouteDeps): AnyRoute[] {
  const { oauth, publicBaseUrl } = deps;
  const resourceOf = (req: Request) => baseUrlOf(req, publicBaseUrl) + MCP_PATH;

  const protectedResource = (req: Request): OAuthProtectedResourceMetadata => {
    const base = baseUrlOf(req, publicBaseUrl);
    return { resource: base + MCP_PATH, authorization_servers: [base], scopes_supported: SCOPES, bearer_methods_supported: ['header'], resource_name: 'Feature flags (MCP)' };
  };

  /** A consent API call's checked request; problems are the envelope's 400 (the page shows them). */
  const checked = async (req: Request, request: AuthorizationRequest) => {
    try {
      return await oauth.checkAuthorization(request, resourceOf(req));
    } catch (error) {
      if (error instanceof UntrustedRedirectError || error instanceof RedirectableError) throw badRequest(error.message);
      throw error;
    }
  };

  return [
    ...[`/.well-known/oauth-protected-resource${MCP_PATH}`, '/.well-known/oauth-protected-resource'].map((path) =>
      defineRoute({
        method: 'get',
        path,
        summary: 'OAuth protected-resource metadata of the MCP endpoint (RFC 9728)',
        tags: ['oauth'],
        auth: 'public',
        handler: ({ req }) => reply(200, protectedResource(req), metadataHeaders(publicBaseUrl)),
      }),
    ),
    defineRoute({
      method: 'get',
      path: '/.well-known/oauth-authorization-server',
      summary: 'OAuth authorization-server metadata (RFC 8414): PKCE S256, public clients, dynamic registration',
      tags: ['oauth'],
      auth: 'public',
      handler({ req }) {
        const base = baseUrlOf(req, publicBaseUrl);
        const metadata: OAuthMetadata = {
          issuer: base,
          authorization_endpoint: `${base}/api/oauth/authorize`,
          token_endpoint: `${base}/api/oauth/token`,
          registration_endpoint: `${base}/api/oauth/register`,
          revocation_endpoint: `${base}/api/oauth/revoke`,
          revocation_endpoint_auth_methods_supported: ['none'],
          scopes_supported: SCOPES,
          response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          token_endpoint_auth_methods_supported: ['none'],
          code_challenge_methods_supported: ['S256'],
          authorization_response_iss_parameter_supported: true,
        };
        return reply(200, metadata, metadataHeaders(publicBaseUrl));
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/oauth/register',
      summary: 'Dynamic client registration (RFC 7591): public clients, https or loopback http redirect URIs',
      tags: ['oauth'],
      auth: 'public',
      csrfExempt: true,
      bodyLimit: 16 * KB,
      body: z.unknown(),
      async beforeBody(ctx) {
        await deps.rateLimiter.enforce(ctx.res, `oauth-register:${ipBucket(ctx.ip)}`, deps.registrationsPerWindow, 'IP address (client registrations)');
      },
      async handler({ body }) {
        try {
          return reply(201, await oauth.register(body), { 'Cache-Control': 'no-store' });
        } catch (error) {
          if (error instanceof ClientMetadataError) return reply(400, rfcError(error.error, error.description), { 'Cache-Control': 'no-store' });
          throw error;
        }
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/oauth/authorize',
      summary: 'Authorization endpoint: the consent page for a signed-in user (HTML), errors back to a registered redirect_uri',
      tags: ['oauth'],
      auth: 'public',
      query: authorizationRequestSchema,
      async handler({ req, res, query, principal }) {
        try {
          await oauth.checkAuthorization(query, resourceOf(req));
        } catch (error) {
          if (error instanceof RedirectableError) {
            const url = new URL(error.redirectUri);
            url.searchParams.set('error', error.error.errorCode);
            url.searchParams.set('error_description', error.error.message);
            if (error.state !== undefined) url.searchParams.set('state', error.state);
            url.searchParams.set('iss', baseUrlOf(req, publicBaseUrl));
            res.setHeader('Cache-Control', 'no-store');
            res.redirect(302, url.toString());
            return HANDLED;
          }
          if (error instanceof UntrustedRedirectError) throw badRequest(error.message);
          throw error;
        }
        sendPage(res, principal.type === 'session' ? consentPage({ csrfToken: principal.csrfToken, userEmail: principal.user.email }) : signInPage(baseUrlOf(req, publicBaseUrl)));
        return HANDLED;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/oauth/consent',
      summary: 'What the consent page shows for an authorization request: the client, the scopes, your projects',
      tags: ['oauth'],
      auth: 'session',
      query: authorizationRequestSchema,
      async handler({ req, query, principal }) {
        return reply(200, await oauth.describeConsent(actingUser(principal)!, await checked(req, query)), { 'Cache-Control': 'no-store' });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/oauth/consent',
      summary: 'Approve (with the chosen projects) or deny an authorization request; answers the redirect to the client',
      tags: ['oauth'],
      auth: 'session',
      body: consentBody,
      async handler({ req, body, principal }) {
        const { projectIds, approve, ...request } = body;
        if (approve && projectIds.length === 0) throw badRequest('choose at least one project', [{ path: 'body.projectIds', message: 'at least one project is required to approve' }]);
        const redirectUrl = await oauth.decideConsent(actingUser(principal)!, await checked(req, request), projectIds, approve, baseUrlOf(req, publicBaseUrl));
        return reply(200, { redirectUrl }, { 'Cache-Control': 'no-store' });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/oauth/token',
      summary: 'Token endpoint (form-encoded): authorization_code with code_verifier, refresh_token with rotation',
      tags: ['oauth'],
      auth: 'public',
      csrfExempt: true,
      handler: ({ req, res }) =>
        protocolAnswer(res, async () => {
          res.status(200).json(await oauth.token(await readForm(req, res)));
        }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/oauth/revoke',
      summary: 'Token revocation (RFC 7009, form-encoded): an access or refresh token ends its connection',
      tags: ['oauth'],
      auth: 'public',
      csrfExempt: true,
      handler: ({ req, res }) =>
        protocolAnswer(res, async () => {
          await oauth.revoke(await readForm(req, res));
          res.status(200).end();
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/users/me/connections',
      summary: "The caller's MCP connections (OAuth consents) that are not revoked",
      tags: ['oauth'],
      auth: 'session',
      async handler({ principal }) {
        return { connections: await oauth.listConnections(actingUser(principal)!) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/users/me/connections/:id',
      summary: 'Revoke an MCP connection: its tokens stop working at once',
      tags: ['oauth'],
      auth: 'session',
      params: z.object({ id: idSchema }),
      async handler({ principal, params }) {
        await oauth.revokeConnection(actingUser(principal)!, params.id);
        return reply(204);
      },
    }),
  ];
}

/**
 * An RFC 6749 / RFC 7591 error body. `message` repeats the description so the body also reads
 * as the error envelope of docs/errors.md (error + message); OAuth clients ignore members they do
 * not know.
 */
const rfcError = (error: string, description: string) => ({ error, error_description: description, message: description });

/** A protocol endpoint's answer (token, revoke): never cached; OAuth errors as RFC 6749 5.2 bodies. */
async function protocolAnswer(res: Response, work: () => Promise<void>): Promise<typeof HANDLED> {
  res.setHeader('Cache-Control', 'no-store');
  try {
    await work();
  } catch (error) {
    if (!(error instanceof OAuthError)) throw error;
    const { error: code, error_description: description } = error.toResponseObject();
    res.status(400).json(rfcError(code, description ?? error.message));
  }
  return HANDLED;
}

const formParser = express.urlencoded({ extended: false, limit: 8 * KB, inflate: false, parameterLimit: 20 });

/** The token request's application/x-www-form-urlencoded body (RFC 6749 3.2); anything else is invalid_request. */
function readForm(req: Request, res: Response): Promise<Record<string, unknown>> {
  if (!req.is('application/x-www-form-urlencoded')) return Promise.reject(new InvalidRequestError('the body must be application/x-www-form-urlencoded'));
  return new Promise((resolve, reject) =>
    formParser(req, res, (error?: unknown) => {
      if (!error) return resolve((req.body ?? {}) as Record<string, unknown>);
      const e = error as { type?: string };
      if (e.type === 'entity.too.large') return reject(new HttpError(413, 'Payload too large'));
      reject(new InvalidRequestError('the form body could not be read'));
    }),
  );
}
