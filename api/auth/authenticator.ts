import { parse as parseCookie } from 'cookie';
import type { Request } from 'express';
import { unauthorized } from '../http/errors';
import { ANONYMOUS, type Principal } from './principal';
import { SESSION_COOKIE, type SessionManager } from './sessions';

/** Resolves one kind of bearer credential (opaque project token, JWT, personal token …). */
export interface BearerResolver {
  /** Cheap syntactic test: does this token belong to this resolver? */
  accepts(token: string): boolean;
  /**
   * The principal, or null when the token is unknown, expired or revoked (401). A resolver may
   * answer synchronously from its memo: the evaluation hot path then allocates no promise.
   */
  resolve(token: string): Principal | null | Promise<Principal | null>;
}

/**
 * Bearer credentials win over the session cookie (and need no CSRF token); an invalid bearer
 * is a 401 even on public routes, so a client learns its token is bad.
 */
export class Authenticator {
  constructor(
    private readonly sessions: SessionManager,
    private readonly resolvers: BearerResolver[] = [],
  ) {}

  private readonly selfAuthenticatedPaths: RegExp[] = [];

  addResolver(resolver: BearerResolver) {
    this.resolvers.push(resolver);
  }

  /**
   * Paths whose handler reads the Authorization header itself because the bearer there is not
   * an access credential (POST /api/projects/{id}/tokens/refresh takes a refresh token).
   */
  addSelfAuthenticatedPath(pattern: RegExp) {
    this.selfAuthenticatedPaths.push(pattern);
  }

  async authenticate(req: Request): Promise<Principal> {
    const bearer = bearerToken(req.headers.authorization);
    if (bearer !== undefined) {
      if (this.selfAuthenticatedPaths.some((p) => p.test(req.path))) return ANONYMOUS;
      return this.resolveBearer(bearer);
    }
    const cookieValue = sessionCookie(req.headers.cookie);
    if (cookieValue) {
      const session = await this.sessions.resolve(cookieValue);
      if (session) return { type: 'session', user: session.user, sessionId: cookieValue, csrfToken: session.csrfToken };
    }
    return ANONYMOUS;
  }

  /** Synchronous when the resolver answered from its memo; throws (or rejects with) 401 otherwise. */
  resolveBearer(token: string): Principal | Promise<Principal> {
    const resolver = this.resolvers.find((r) => r.accepts(token));
    const principal = resolver ? resolver.resolve(token) : null;
    return principal instanceof Promise ? principal.then(acceptedBearer) : acceptedBearer(principal);
  }
}

function acceptedBearer(principal: Principal | null): Principal {
  if (!principal) throw unauthorized('Invalid, expired or revoked token');
  return principal;
}

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw unauthorized('Authorization header must be "Bearer <token>"');
  return match[1];
}

export function sessionCookie(header: string | undefined): string | undefined {
  if (!header) return undefined;
  return parseCookie(header)[SESSION_COOKIE];
}
