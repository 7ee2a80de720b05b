import type { BearerResolver } from '../../auth/authenticator';
import { looksLikeJwt } from '../../auth/jwt';
import type { ProjectTokenService } from './service';
import { OPAQUE_TOKEN_PREFIX } from './types';

/** `Authorization: Bearer fgr_…` (docs/api-reference.md#project-api-tokens). */
export function opaqueTokenResolver(tokens: ProjectTokenService): BearerResolver {
  return { accepts: (token) => token.startsWith(OPAQUE_TOKEN_PREFIX), resolve: (token) => tokens.resolveOpaque(token) };
}

/**
 * `Authorization: Bearer <JWT access token>` (docs/api-reference.md#project-api-tokens); refresh
 * tokens are refused here.
 */
export function jwtAccessTokenResolver(tokens: ProjectTokenService): BearerResolver {
  return { accepts: looksLikeJwt, resolve: (token) => tokens.resolveJwt(token) };
}
