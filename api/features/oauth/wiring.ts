import type { Authenticator } from '../../auth/authenticator';
import type { RateLimiter } from '../../http/rate-limit';
import type { ListenerRoutes } from '../../http/route';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import { connectorTokenResolver, oauthRoutes } from './routes';
import { OAuthService } from './service';
import { OAuthStore } from './store';

/** Dynamic client registrations per IP address per RATE_LIMIT_WINDOW_SECONDS: a client registers once per install. */
const REGISTRATIONS_PER_WINDOW = 20;

export interface OAuthFeatureDeps {
  sql: Sql;
  logger: Logger;
  rateLimiter: RateLimiter;
  authenticator: Authenticator;
  publicBaseUrl: string | undefined;
}

/** OAuth 2.1 for MCP clients (docs/mcp.md): its routes, and `mcp_` connector tokens in the authenticator. */
export function createOAuthFeature(deps: OAuthFeatureDeps): { routes: ListenerRoutes; oauth: OAuthService } {
  const oauth = new OAuthService({ sql: deps.sql, store: new OAuthStore(), logger: deps.logger });
  deps.authenticator.addResolver(connectorTokenResolver(oauth));
  return { oauth, routes: { control: oauthRoutes({ oauth, rateLimiter: deps.rateLimiter, publicBaseUrl: deps.publicBaseUrl, registrationsPerWindow: REGISTRATIONS_PER_WINDOW }) } };
}
