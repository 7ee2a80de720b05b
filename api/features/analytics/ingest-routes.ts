import type { AnalyticsSink } from '../../../analytics/rows';
import type { ProjectAccess } from '../../auth/access';
import type { Authenticator } from '../../auth/authenticator';
import type { Config } from '../../config';
import { RateLimiter } from '../../http/rate-limit';
import type { AnyRoute } from '../../http/route';
import type { Cache } from '../../infra/cache';
import type { Sql } from '../../infra/postgres';
import { adminIngestRoutes } from './ingest-admin';
import { browserIngestRoutes } from './ingest-browser';
import { otlpIngestRoutes, type ExposureSink, type OtlpIngestDeps } from './ingest-otlp';
import { sdkIngestRoutes } from './ingest-sdk';
import { IngestSites } from './ingest-sites';
import { createCountryReader, createUserAgentParser } from './user-agent';

export interface IngestDeps {
  config: Config;
  sql: Sql;
  cache: Cache;
  access: ProjectAccess;
  authenticator: Authenticator;
  sink: AnalyticsSink;
  /** The evaluation events writer: OpenTelemetry exposures are evaluation events. */
  evaluations: ExposureSink;
  /** The evaluation feature's snapshots where this process has them: OpenTelemetry exposures are placed on rollouts. */
  snapshots?: OtlpIngestDeps['snapshots'];
}

/**
 * Browser and admin ingestion are counted per minute (docs/limits.md#rate-limits), whatever
 * RATE_LIMIT_WINDOW_SECONDS is.
 */
const INGEST_WINDOW_SECONDS = 60;

/**
 * Ingestion routes per listener (docs/api-reference.md#addresses-and-processes): SDK track and
 * telemetry on the control and data planes; browser events and OpenTelemetry exports (OTLP/HTTP) on
 * the ingest listener; admin events on the control plane and the ingest listener.
 */
export function ingestRoutes(deps: IngestDeps): Record<'control' | 'data' | 'ingest', AnyRoute[]> {
  const { config, sink } = deps;
  const limiter = new RateLimiter(deps.cache, INGEST_WINDOW_SECONDS);
  // One cache of service -> project for SDK and browser callers.
  const sites = new IngestSites(deps.sql);
  const readers = { sink, sites, roleOf: (userId: string, projectId: string) => deps.access.roleOf(userId, projectId) };
  const sdk = sdkIngestRoutes(readers);
  const otlp = otlpIngestRoutes({ ...readers, evaluations: deps.evaluations, snapshots: deps.snapshots });
  const admin = adminIngestRoutes({ sink, limiter, extraSiteId: config.ADMIN_ANALYTICS_SITE_ID });
  const browser = browserIngestRoutes({
    sink,
    sites,
    authenticator: deps.authenticator,
    limiter,
    userAgent: createUserAgentParser(),
    country: createCountryReader(config.TRUSTED_PROXIES, config.COUNTRY_HEADER),
  });
  return { control: [...sdk, ...admin], data: sdk, ingest: [...browser, ...admin, ...otlp] };
}
