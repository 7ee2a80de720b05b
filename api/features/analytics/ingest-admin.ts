import { z } from 'zod';
import type { AdminEventRow, AnalyticsSink } from '../../../analytics/rows';
import type { RateLimiter } from '../../http/rate-limit';
import { KB, defineRoute, reply, type AnyRoute } from '../../http/route';
import { hashTargetingKey } from '../evaluation/recorder';
import { EventName, EventTime, PREFLIGHT_HEADERS, inWindow, jsonObjectText, newEventId, parseItem, pending, publicIngestGate, recordAll, type ItemProblem, type PendingRow } from './ingest-common';

/** At most 100 admin events per batch (docs/analytics-ingestion.md, docs/limits.md). */
export const ADMIN_MAX_EVENTS = 100;
/** Admin events take the browser ingestion's byte limit (100 KB) beside their own 100 events. */
export const ADMIN_BODY_LIMIT = 100 * KB;
const MAX_PROPERTIES_JSON = 4_096;

/** The console's own site ids (docs/analytics-ingestion.md); ADMIN_ANALYTICS_SITE_ID adds one. */
export const ADMIN_SITE_IDS = ['svc_admin_prod', 'svc_admin_preview', 'svc_admin_dev'] as const;

const Short = z.string().max(64);

const AdminEvent = z
  .object({
    source: Short.default(''),
    siteId: z.string().min(1).max(128),
    sessionId: z.string().max(128).default(''),
    installId: z.string().max(128).default(''),
    userId: z.string().min(1).max(256).optional().describe('Kept only as hashTargetingKey(userId)'),
    event: EventName,
    occurredAt: EventTime.describe('ISO 8601 or epoch ms; no more than 2 h old and 60 s ahead'),
    appVersion: Short.default(''),
    buildNumber: Short.default(''),
    appVariant: Short.default(''),
    platform: Short.default(''),
    apiOrigin: z.string().max(256).default(''),
    properties: jsonObjectText(MAX_PROPERTIES_JSON).optional().describe('A JSON object; properties.projectId names the project for the admin funnel'),
  })
  .strict();

const AdminResponse = z.object({
  accepted: z.number().int(),
  rejected: z.number().int(),
  siteId: z.string().nullable().describe('The site id of the accepted events (the first one when they differ); null when none was accepted'),
  errors: z.array(z.object({ index: z.number().int(), message: z.string() })),
});

/**
 * Product analytics of the console itself (`/ingest/admin-events`, docs/analytics-ingestion.md), on
 * the control plane and the ingest listener. Called by instrumentation without a credential: only
 * the allowed site ids are taken, and each IP may post 100 batches per minute.
 */
export function adminIngestRoutes(deps: { sink: AnalyticsSink; limiter: RateLimiter; extraSiteId?: string }): AnyRoute[] {
  const { sink } = deps;
  const allowed = new Set<string>([...ADMIN_SITE_IDS, ...(deps.extraSiteId ? [deps.extraSiteId] : [])]);
  return [
    defineRoute({
      method: 'options',
      path: '/ingest/admin-events',
      summary: 'CORS preflight for admin events',
      tags: ['analytics'],
      auth: 'public',
      status: 204,
      handler: () => reply(204, undefined, PREFLIGHT_HEADERS),
    }),
    defineRoute({
      method: 'post',
      path: '/ingest/admin-events',
      summary: "The console's own product events (screen_viewed, flag_viewed, activation ...): at most 100, allowed site ids only, occurredAt within -2 h / +60 s",
      tags: ['analytics'],
      auth: 'public',
      // Reads no cookie credential: a cross-site post can do nothing a direct one could not.
      csrfExempt: true,
      status: 202,
      bodyLimit: ADMIN_BODY_LIMIT,
      beforeBody: publicIngestGate(deps.limiter, 'ingest-admin'),
      body: z.array(z.unknown()).max(ADMIN_MAX_EVENTS).describe(`At most ${ADMIN_MAX_EVENTS} events`),
      response: AdminResponse,
      handler(ctx) {
        const now = Date.now();
        const rows: PendingRow[] = [];
        const errors: ItemProblem[] = [];
        let siteId: string | null = null;
        ctx.body.forEach((item, index) => {
          const parsed = parseItem(AdminEvent, item);
          if (!parsed.ok) return errors.push({ index, message: parsed.message });
          const e = parsed.value;
          if (!allowed.has(e.siteId)) return errors.push({ index, message: `siteId: must be one of ${[...allowed].join(', ')}` });
          const occurredAt = inWindow(e.occurredAt, now);
          if (typeof occurredAt === 'string') return errors.push({ index, message: occurredAt.replace('timestamp', 'occurredAt') });
          siteId ??= e.siteId;
          const properties = e.properties ?? '{}';
          const row: AdminEventRow = {
            occurredAt,
            receivedAt: now,
            siteId: e.siteId,
            source: e.source,
            sessionId: e.sessionId,
            installId: e.installId,
            userHash: e.userId === undefined ? '' : hashTargetingKey(e.userId),
            event: e.event,
            projectId: projectIdOf(properties),
            appVersion: e.appVersion,
            buildNumber: e.buildNumber,
            appVariant: e.appVariant,
            platform: e.platform,
            apiOrigin: e.apiOrigin,
            properties,
            eventId: newEventId(),
          };
          rows.push(pending('admin_events', row));
        });
        recordAll(sink, rows);
        return { accepted: rows.length, rejected: errors.length, siteId, errors };
      },
    }),
  ];
}

/** properties.projectId when it is a plausible id, for the admin funnel; '' otherwise. */
function projectIdOf(propertiesJson: string): string {
  const projectId = (JSON.parse(propertiesJson) as { projectId?: unknown }).projectId;
  return typeof projectId === 'string' && projectId.length <= 128 ? projectId : '';
}
