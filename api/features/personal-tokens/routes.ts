import { z } from 'zod';
import type { BearerResolver } from '../../auth/authenticator';
import { actingUser } from '../../auth/principal';
import { defineRoute, reply, type AnyRoute } from '../../http/route';
import type { PersonalTokenService } from './service';
import { CreatePersonalTokenBody, PERSONAL_TOKEN_PREFIX, PersonalTokenSchema, RotatePersonalTokenBody } from './types';

const TokenParams = z.object({ id: z.string().min(1).max(100) });

/** `Authorization: Bearer fgp_…` (docs/api-reference.md#personal-access-tokens). */
export function personalTokenResolver(tokens: PersonalTokenService): BearerResolver {
  return { accepts: (token) => token.startsWith(PERSONAL_TOKEN_PREFIX), resolve: (token) => tokens.resolve(token) };
}

/**
 * The four management endpoints (docs/api-reference.md#personal-access-tokens) work only from a
 * dashboard session (every token kind is refused centrally by `auth: 'session'`).
 */
export function personalTokenRoutes(deps: { tokens: PersonalTokenService }): AnyRoute[] {
  const { tokens } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/users/me/personal-tokens',
      summary: "The caller's personal access tokens that are not revoked (never the secret or its hash)",
      tags: ['personal-tokens'],
      auth: 'session',
      response: z.object({ tokens: z.array(PersonalTokenSchema) }),
      async handler({ principal }) {
        return { tokens: await tokens.list(actingUser(principal)!) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/users/me/personal-tokens',
      summary: 'Create a personal access token; the secret `value` is shown only here',
      tags: ['personal-tokens'],
      auth: 'session',
      status: 201,
      body: CreatePersonalTokenBody,
      response: z.object({ token: PersonalTokenSchema, value: z.string() }),
      async handler({ principal, body }) {
        return reply(201, await tokens.create(actingUser(principal)!, body), { 'Cache-Control': 'no-store' });
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/users/me/personal-tokens/:id',
      summary: 'Revoke a personal access token (immediately here, within seconds on every replica)',
      tags: ['personal-tokens'],
      auth: 'session',
      params: TokenParams,
      async handler({ principal, params }) {
        await tokens.revoke(actingUser(principal)!, params.id);
        return reply(204);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/users/me/personal-tokens/:id/rotate',
      summary: 'Replace a live token with a new secret keeping its name, tier, owner-actions setting and lifetime',
      tags: ['personal-tokens'],
      auth: 'session',
      params: TokenParams,
      body: RotatePersonalTokenBody.optional(),
      response: z.object({ token: PersonalTokenSchema, value: z.string(), rotatedFrom: z.string() }),
      async handler({ principal, params, body }) {
        return reply(200, await tokens.rotate(actingUser(principal)!, params.id, body?.expiresInDays), { 'Cache-Control': 'no-store' });
      },
    }),
  ];
}
