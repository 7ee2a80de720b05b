import { Code, ConnectError } from '@connectrpc/connect';
import { bearerToken, type Authenticator } from '../../auth/authenticator';
import type { Principal, ProjectTokenPrincipal } from '../../auth/principal';
import type { Environment } from '../../domain/environments';
import { HttpError } from '../../http/errors';
import type { ServiceGrant } from '../evaluation/access';
import type { EvaluationService } from '../evaluation/service';

/**
 * Who a flagd call speaks for (docs/local-evaluation.md#credentials): a bound project API token,
 * named by the `flagd-selector` metadata or the request's `selector` field (the token itself or
 * `flagSetId=<token>`), else by `authorization: Bearer <token>`. The token is verified exactly as
 * on the HTTP data plane (the authenticator's bearer resolvers), and the flag set is its bound
 * service and environment.
 */

export const SELECTOR_HEADER = 'flagd-selector';

/** A verified flag set: the token, its principal and what it may read. */
export interface FlagSet {
  token: string;
  principal: ProjectTokenPrincipal;
  serviceId: string;
  environment: Environment;
  grant: ServiceGrant;
}

const SELECTOR_MAX_LENGTH = 4096;

/**
 * The token a selector names: the selector itself, or its `flagSetId` entry when it is written as
 * flagd's `key=value` pairs (comma-separated).
 */
export function tokenOfSelector(selector: string): string | undefined {
  const trimmed = selector.trim();
  if (trimmed === '' || trimmed.length > SELECTOR_MAX_LENGTH) return undefined;
  if (!trimmed.includes('=')) return trimmed;
  for (const pair of trimmed.split(',')) {
    const at = pair.indexOf('=');
    if (pair.slice(0, at).trim() === 'flagSetId') return pair.slice(at + 1).trim() || undefined;
  }
  return undefined;
}

/** The credential of a call: the selector (metadata, then request field), else the bearer token. */
export function credentialOf(headers: Headers, requestSelector = ''): string | undefined {
  return credentialFrom(headers.get(SELECTOR_HEADER) ?? undefined, headers.get('authorization') ?? undefined, requestSelector);
}

/** credentialOf from the two headers themselves (the lean gRPC path reads raw HTTP/2 headers). */
export function credentialFrom(selectorHeader: string | undefined, authorization: string | undefined, requestSelector = ''): string | undefined {
  const selector = selectorHeader ?? (requestSelector !== '' ? requestSelector : undefined);
  if (selector !== undefined) return tokenOfSelector(selector);
  try {
    return bearerToken(authorization);
  } catch {
    return undefined;
  }
}

const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);

/** The authenticator's 401 as UNAUTHENTICATED; other failures as they are. */
function refusal(error: unknown): unknown {
  return error instanceof HttpError && error.status === 401 ? unauthenticated('Invalid, expired or revoked token') : error;
}

function withGrant(bound: Omit<FlagSet, 'grant'>, grant: ServiceGrant): FlagSet {
  if (grant.visibility !== 'all') throw new ConnectError('The token lacks the read permission', Code.PermissionDenied);
  return { ...bound, grant };
}

export class FlagdCredentials {
  constructor(private readonly deps: { authenticator: Authenticator; evaluation: EvaluationService }) {}

  /**
   * The flag set of a credential. UNAUTHENTICATED without one, or for an unknown, revoked,
   * expired or unbound token (or any other kind of credential); PERMISSION_DENIED for a bound
   * token without `read`. Synchronous when the token and its service's snapshot are known (the
   * authenticator's memo, grantNow), so a hot call waits on nothing.
   */
  verify(token: string | undefined): FlagSet | Promise<FlagSet> {
    if (token === undefined) throw unauthenticated('A selector is required: a bound project API token (flagd-selector metadata, or flagSetId=<token>)');
    let principal;
    try {
      principal = this.deps.authenticator.resolveBearer(token);
    } catch (error) {
      throw refusal(error);
    }
    if (principal instanceof Promise) {
      return principal.then(
        (resolved) => this.flagSetOf(token, resolved),
        (error: unknown) => {
          throw refusal(error);
        },
      );
    }
    return this.flagSetOf(token, principal);
  }

  private flagSetOf(token: string, principal: Principal): FlagSet | Promise<FlagSet> {
    if (principal.type !== 'project_api_token' || !principal.scope) {
      throw unauthenticated('The selector must be a project API token bound to a service and environment');
    }
    const bound = { token, principal, serviceId: principal.scope.serviceId, environment: principal.scope.environment };
    const known = this.deps.evaluation.grantNow(principal, bound.serviceId);
    if (known !== undefined) return withGrant(bound, known);
    return this.deps.evaluation.grant(principal, bound.serviceId).then(
      (grant) => withGrant(bound, grant),
      (error: unknown) => {
        // The bound service is gone: the token names no flag set any more.
        if (error instanceof HttpError && error.status === 404) throw unauthenticated('The token names no flag set');
        throw error;
      },
    );
  }

  /** Whether the token still verifies (revocation checks of open streams); errors other than a refusal count as yes. */
  async stillValid(token: string): Promise<boolean> {
    try {
      await this.deps.authenticator.resolveBearer(token);
      return true;
    } catch (error) {
      return !(error instanceof HttpError && error.status === 401);
    }
  }
}
