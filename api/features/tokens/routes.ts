import { z } from 'zod';
import { bearerToken } from '../../auth/authenticator';
import type { JwtCodec } from '../../auth/jwt';
import { actingUser } from '../../auth/principal';
import { unauthorized } from '../../http/errors';
import { defineRoute, reply, type AnyRoute } from '../../http/route';
import type { ProjectTokenService } from './service';
import { CreateTokenBody, ProjectTokenSchema, TokenPairSchema } from './types';

export const TOKEN_REFRESH_PATH = /^\/api\/projects\/[^/]+\/tokens\/refresh\/?$/;

const ProjectParams = z.object({ id: z.string().min(1).max(100) });
const TokenParams = ProjectParams.extend({ tokenId: z.string().min(1).max(100) });

export function tokenRoutes(deps: { tokens: ProjectTokenService; jwt: JwtCodec }): AnyRoute[] {
  const { tokens } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/projects/:id/tokens',
      summary: "The project's live API tokens (never their secrets)",
      tags: ['tokens'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', project: (ctx) => ctx.params.id },
      params: ProjectParams,
      response: z.object({ tokens: z.array(ProjectTokenSchema) }),
      async handler({ params }) {
        return { tokens: await tokens.list(params.id) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/tokens',
      summary: 'Create an opaque (`permissions`) or JWT (`scopes`) project token; the secret is returned only here',
      tags: ['tokens'],
      auth: 'authenticated',
      // A token mints no scope it does not hold (ProjectTokenService).
      access: { capability: 'settings:manage', project: (ctx) => ctx.params.id },
      // Personal tokens may list and revoke project tokens, never create them
      // (docs/api-reference.md#personal-access-tokens).
      noPersonalTokens: true,
      status: 201,
      params: ProjectParams,
      body: CreateTokenBody,
      response: z.object({ token: ProjectTokenSchema, value: z.string().optional() }).merge(TokenPairSchema.partial()),
      async handler({ principal, params, body, ip, userAgent }) {
        return reply(201, await tokens.create(principal, params.id, body, { ip, userAgent }), { 'Cache-Control': 'no-store' });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/projects/:id/tokens/refresh',
      summary: 'Exchange a JWT refresh token (Authorization: Bearer <refresh token>) for a new access and refresh token',
      tags: ['tokens'],
      // The refresh token is the credential; the authenticator leaves it to this handler.
      auth: 'public',
      csrfExempt: true,
      params: ProjectParams,
      response: TokenPairSchema,
      async handler({ params, req, ip, userAgent }) {
        const presented = bearerToken(req.headers.authorization);
        if (!presented) throw unauthorized('Send the refresh token as "Authorization: Bearer <refresh token>"');
        return reply(200, await tokens.refresh(params.id, presented, { ip, userAgent }), { 'Cache-Control': 'no-store' });
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/projects/:id/tokens/:tokenId',
      summary: 'Revoke a project token at once (for a JWT, every access and refresh token of it)',
      tags: ['tokens'],
      auth: 'authenticated',
      access: { capability: 'settings:manage', project: (ctx) => ctx.params.id },
      params: TokenParams,
      async handler({ principal, params, ip, userAgent }) {
        await tokens.revoke(principal, params.id, params.tokenId, { ip, userAgent });
        return reply(204);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/users/me/tokens',
      summary: 'Live project tokens the caller created, across the projects they belong to',
      tags: ['tokens'],
      auth: 'user',
      response: z.object({ tokens: z.array(ProjectTokenSchema) }),
      async handler({ principal }) {
        return { tokens: await tokens.listCreatedBy(actingUser(principal)!) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/.well-known/jwks.json',
      summary: 'Public keys that verify project JWTs (EdDSA, by kid)',
      tags: ['tokens'],
      auth: 'public',
      handler() {
        return reply(200, deps.jwt.publicJwks(), { 'Cache-Control': 'public, max-age=300' });
      },
    }),
  ];
}
