import { Code, ConnectError } from '@connectrpc/connect';
import { bearerToken, type Authenticator } from '../../auth/authenticator';
import type { ProjectTokenPrincipal } from '../../auth/principal';
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
  const selector = headers.get(SELECTOR_HEADER) ?? (requestSelector !== '' ? requestSelector : null);
  if (selector !== null) return tokenOfSelector(selector);
  try {
    return bearerToken(headers.get('authorization') ?? undefined);
  } catch {
    return undefined;
  }
}

const unauthenticated = (message: string) => new ConnectError(message, Code.Unauthenticated);

export class FlagdCredentials {
  constructor(private readonly deps: { authenticator: Authenticator; evaluation: EvaluationService }) {}

  /**
   * The flag set of a credential. UNAUTHENTICATED without one, or for an unknown, revoked,
   * expired or unbound token (or any other kind of credential); PERMISSION_DENIED for a bound
   * token without `read`.
   */
  async verify(token: string | undefined): Promise<FlagSet> {
    if (token === undefined) throw unauthenticated('A selector is required: a bound project API token (flagd-selector metadata, or flagSetId=<token>)');
    let principal;
    try {
      principal = await this.deps.authenticator.resolveBearer(token);
    } catch (error) {
      if (error instanceof HttpError && error.status === 401) throw unauthenticated('Invalid, expired or revoked token');
      throw error;
    }
    if (principal.type !== 'project_api_token' || !principal.scope) {
      throw unauthenticated('The selector must be a project API token bound to a service and environment');
    }
    const { serviceId, environment } = principal.scope;
    let grant: ServiceGrant;
    try {
      grant = this.deps.evaluation.grantNow(principal, serviceId) ?? (await this.deps.evaluation.grant(principal, serviceId));
    } catch (error) {
      // The bound service is gone: the token names no flag set any more.
      if (error instanceof HttpError && error.status === 404) throw unauthenticated('The token names no flag set');
      throw error;
    }
    if (grant.visibility !== 'all') throw new ConnectError('The token lacks the read permission', Code.PermissionDenied);
    return { token, principal, serviceId, environment, grant };
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
