import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import type { AnalyticsSink, BrowserEventRow, BrowserEventType } from '../../../analytics/rows';
import { decide } from '../../auth/access';
import type { Authenticator } from '../../auth/authenticator';
import type { Principal } from '../../auth/principal';
import { unauthorized } from '../../http/errors';
import type { RateLimiter } from '../../http/rate-limit';
import { KB, defineRoute, reply, type AnyRoute } from '../../http/route';
import { hashTargetingKey } from '../evaluation/recorder';
import { idSchema } from '../projects/common';
import {
  EventName,
  EventTime,
  FlagValues,
  PREFLIGHT_HEADERS,
  inWindow,
  jsonObjectText,
  newEventId,
  parseItem,
  pending,
  publicIngestGate,
  recordAll,
  type ItemProblem,
  type PendingRow,
} from './ingest-common';
import type { IngestSites } from './ingest-sites';
import type { UserAgentFacts } from './user-agent';

/** 100 items and 100 KB per request, and 100 requests per minute per IP (docs/limits.md). */
export const BROWSER_MAX_ITEMS = 100;
export const BROWSER_BODY_LIMIT = 100 * KB;
const MAX_URL = 2_048;
const MAX_DATA_JSON = 4_096;

const BROWSER_TYPES = ['pageview', 'webvital', 'click', 'error', 'scroll', 'custom'] as const satisfies readonly BrowserEventType[];
const WEB_VITALS = ['lcp', 'cls', 'inp', 'ttfb', 'fcp'];

const BrowserEvent = z
  .object({
    type: z.enum(BROWSER_TYPES),
    siteId: idSchema.describe('The service id'),
    url: z.string().max(MAX_URL),
    timestamp: EventTime.describe('ISO 8601 or epoch ms; accepted from 2 h old to 60 s ahead'),
    sessionId: z.string().min(1).max(128),
    visitorId: z.string().min(1).max(256).optional(),
    referrer: z.string().max(MAX_URL).optional(),
    name: z.string().min(1).max(64).optional(),
    value: z.number().finite().optional(),
    flags: FlagValues.optional(),
    data: jsonObjectText(MAX_DATA_JSON).optional(),
  })
  .strict()
  .superRefine((e, ctx) => {
    if (e.type === 'webvital') {
      if (e.name === undefined || !WEB_VITALS.includes(e.name.toLowerCase())) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['name'], message: `a webvital needs name ${WEB_VITALS.join(', ')}` });
      }
      if (e.value === undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['value'], message: 'a webvital needs a value' });
    }
    if (e.type === 'custom' && !EventName.safeParse(e.name).success) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['name'], message: 'a custom event needs a name of 1-64 of A-Z a-z 0-9 _ . : -' });
    }
  });

const IngestResponse = z.object({
  accepted: z.number().int(),
  rejected: z.number().int(),
  errors: z.array(z.object({ index: z.number().int(), message: z.string() })).describe('Why each rejected item was refused'),
});

export interface BrowserIngestDeps {
  sink: AnalyticsSink;
  sites: IngestSites;
  authenticator: Authenticator;
  /** A 60-second window: the per-IP budget is per minute. */
  limiter: RateLimiter;
  userAgent: (header: string) => UserAgentFacts;
  country: (req: IncomingMessage) => string;
}

const WRITE_TOKEN_NEEDED = "siteId: the site's project requires X-Write-Token, a project API token with write";

/**
 * Browser analytics (docs/api-reference.md#browser-analytics, docs/analytics-ingestion.md,
 * docs/limits.md): `POST /e` on the ingest listener. Anyone may post for a site unless its project
 * requires a write token. Browser, OS, device and country are the server's own reading of the
 * request; fields of those names from the client are refused.
 */
export function browserIngestRoutes(deps: BrowserIngestDeps): AnyRoute[] {
  const { sink, sites } = deps;
  return [
    defineRoute({
      method: 'options',
      path: '/e',
      summary: 'CORS preflight for browser events: any origin, POST with Content-Type and X-Write-Token',
      tags: ['analytics'],
      auth: 'public',
      status: 204,
      handler: () => reply(204, undefined, PREFLIGHT_HEADERS),
    }),
    defineRoute({
      method: 'post',
      path: '/e',
      summary: 'Browser events (pageview, webvital, click, error, scroll, custom): at most 100 items and 100 KB, 100 requests per minute per IP; each item validated on its own',
      tags: ['analytics'],
      auth: 'public',
      // No cookie credential is read here (cross-site posts are the point); a write token is a header.
      csrfExempt: true,
      status: 202,
      bodyLimit: BROWSER_BODY_LIMIT,
      // Pages send analytics as they unload: navigator.sendBeacon posts strings as text/plain.
      textPlainJson: true,
      beforeBody: publicIngestGate(deps.limiter, 'ingest-e'),
      body: z.array(z.unknown()).max(BROWSER_MAX_ITEMS).describe(`At most ${BROWSER_MAX_ITEMS} events`),
      response: IngestResponse,
      async handler(ctx) {
        const writeToken = await writeTokenOf(deps.authenticator, ctx.req.get('x-write-token'));
        const items = ctx.body.map((item) => parseItem(BrowserEvent, item));
        const known = await sites.resolve(items.flatMap((p) => (p.ok ? [p.value.siteId] : [])));
        const now = Date.now();
        const client = deps.userAgent(ctx.userAgent);
        const country = deps.country(ctx.req);
        const rows: PendingRow[] = [];
        const errors: ItemProblem[] = [];
        items.forEach((parsed, index) => {
          if (!parsed.ok) return errors.push({ index, message: parsed.message });
          const e = parsed.value;
          const site = known.get(e.siteId);
          if (!site) return errors.push({ index, message: 'siteId: unknown site' });
          if (site.requireWriteToken && !writes(writeToken, site.projectId)) return errors.push({ index, message: WRITE_TOKEN_NEEDED });
          const timestamp = inWindow(e.timestamp, now);
          if (typeof timestamp === 'string') return errors.push({ index, message: timestamp });
          const row: BrowserEventRow = {
            timestamp,
            receivedAt: now,
            projectId: site.projectId,
            serviceId: e.siteId,
            type: e.type,
            url: e.url,
            referrer: e.referrer ?? '',
            sessionId: e.sessionId,
            visitorHash: e.visitorId === undefined ? '' : hashTargetingKey(e.visitorId),
            name: e.type === 'webvital' && e.name !== undefined ? e.name.toLowerCase() : e.name ?? '',
            value: e.value ?? null,
            flags: e.flags ?? {},
            data: e.data ?? '{}',
            country,
            browser: client.browser,
            os: client.os,
            device: client.device,
            eventId: newEventId(),
          };
          rows.push(pending('browser_events', row));
        });
        recordAll(sink, rows);
        return { accepted: rows.length, rejected: errors.length, errors };
      },
    }),
  ];
}

/** The principal of X-Write-Token, when sent: an unknown, expired or revoked token is a 401 as anywhere. */
async function writeTokenOf(authenticator: Authenticator, header: string | undefined): Promise<Principal | undefined> {
  if (header === undefined || header === '') return undefined;
  const principal = await authenticator.resolveBearer(header.trim());
  if (principal.type !== 'project_api_token') throw unauthorized('X-Write-Token must be a project API token with write');
  return principal;
}

const writes = (principal: Principal | undefined, projectId: string) => principal !== undefined && decide(principal, projectId, null, 'flags:write') === null;
