import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { ProjectAccess } from '../../auth/access';
import { bearerToken, type Authenticator } from '../../auth/authenticator';
import type { PersonalTokenPrincipal } from '../../auth/principal';
import { HttpError, unauthorized } from '../../http/errors';
import type { RateLimiter } from '../../http/rate-limit';
import { BODY_LIMITS, defineRoute, HANDLED, type AnyRoute, type RequestContext } from '../../http/route';
import { baseUrlOf, MCP_PATH, protectedResourceMetadataUrl } from '../oauth/routes';
import { RouteInvoker } from './invoke';
import { buildMcpServer } from './tools';

export interface McpRouteDeps {
  /** The control plane's routes: what the tools run. */
  routes: readonly AnyRoute[];
  access: Pick<ProjectAccess, 'check'>;
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  perTokenLimit: number;
  publicBaseUrl: string | undefined;
  version: string;
}

/**
 * The hosted MCP server (docs/api-reference.md#oauth-and-mcp): Streamable HTTP, stateless (a server
 * and a transport per request, JSON answers). Only connector tokens (`mcp_`) are accepted; without
 * one the answer is a 401 whose WWW-Authenticate names the protected-resource metadata, where an
 * MCP client starts the OAuth flow.
 */
export function mcpRoutes(deps: McpRouteDeps): AnyRoute[] {
  // The handler reads the bearer itself: a bad token must get the WWW-Authenticate challenge too.
  deps.authenticator.addSelfAuthenticatedPath(new RegExp(`^${MCP_PATH}$`));
  const invoker = new RouteInvoker(deps.routes, deps.access);

  /** The connector principal of the request, or a 401 carrying the OAuth challenge. */
  const connector = async (req: Request, res: Response): Promise<PersonalTokenPrincipal> => {
    const metadata = protectedResourceMetadataUrl(baseUrlOf(req, deps.publicBaseUrl));
    const challenge = (error?: string) => {
      res.setHeader('WWW-Authenticate', `Bearer resource_metadata="${metadata}"${error ? `, error="${error}"` : ''}`);
    };
    let token: string | undefined;
    try {
      token = bearerToken(req.headers.authorization);
    } catch (error) {
      challenge('invalid_request');
      throw error;
    }
    if (token === undefined) {
      challenge();
      throw unauthorized('Connect through OAuth: the protected-resource metadata is named in WWW-Authenticate');
    }
    try {
      const principal = await deps.authenticator.resolveBearer(token);
      if (principal.type === 'personal_access_token' && principal.connection) return principal;
    } catch (error) {
      if (!(error instanceof HttpError && error.status === 401)) throw error;
    }
    challenge('invalid_token');
    throw unauthorized('The MCP endpoint takes a connector token (mcp_) from its OAuth flow; this one is invalid, expired or revoked');
  };

  const refuseMethod = async (ctx: RequestContext<unknown, unknown, unknown>) => {
    await connector(ctx.req, ctx.res);
    ctx.res.setHeader('Allow', 'POST');
    throw new HttpError(405, 'This MCP server is stateless: send every message as a POST');
  };

  return [
    defineRoute({
      method: 'post',
      path: MCP_PATH,
      summary: 'MCP Streamable HTTP endpoint (JSON-RPC); Bearer connector token from the OAuth flow',
      tags: ['mcp'],
      auth: 'public',
      csrfExempt: true,
      bodyLimit: BODY_LIMITS.flagWrite,
      body: z.unknown(),
      async handler(ctx) {
        const principal = await connector(ctx.req, ctx.res);
        await deps.rateLimiter.enforce(ctx.res, `token:${principal.tokenId}`, deps.perTokenLimit, 'API token');
        const server = buildMcpServer({
          invoker,
          caller: { principal, ip: ctx.ip, userAgent: ctx.userAgent, requestId: ctx.requestId, log: ctx.log, req: ctx.req, res: ctx.res },
          version: deps.version,
        });
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        ctx.res.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(ctx.req, ctx.res, ctx.body);
        return HANDLED;
      },
    }),
    defineRoute({ method: 'get', path: MCP_PATH, summary: 'Not offered: the server is stateless (405 after authentication)', tags: ['mcp'], auth: 'public', handler: refuseMethod }),
    defineRoute({ method: 'delete', path: MCP_PATH, summary: 'Not offered: the server keeps no sessions (405 after authentication)', tags: ['mcp'], auth: 'public', csrfExempt: true, handler: refuseMethod }),
  ];
}
