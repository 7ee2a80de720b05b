/**
 * The console's own usage (`/ingest/admin-events`, docs/analytics-ingestion.md), which the admin
 * funnel (GET /api/analytics/admin-funnel: screen_viewed -> flag_viewed -> activation per user)
 * reads. The control plane serves that route too, so the console posts it same-origin: no CORS, no
 * other origin in connect-src. Events are batched (at most 100 a post, docs/limits.md) and flushed
 * every few seconds and when the tab is hidden; losing a batch is fine, so failures are dropped.
 *
 * The router calls screenViewed on every screen change; pages call flagViewed and activation.
 */

/**
 * The console's site ids (docs/analytics-ingestion.md): the built console reports as production,
 * the dev server as dev.
 */
const SITE_ID = import.meta.env.PROD ? 'svc_admin_prod' : 'svc_admin_dev';
const MAX_BATCH = 100;
const FLUSH_MS = 5_000;

interface AdminEvent {
  source: string;
  siteId: string;
  sessionId: string;
  installId: string;
  userId?: string;
  event: string;
  occurredAt: number;
  platform: string;
  apiOrigin: string;
  properties: Record<string, string | number | boolean>;
}

const queue: AdminEvent[] = [];
let timer: ReturnType<typeof setTimeout> | undefined;
let userId: string | undefined;

/** getRandomValues, not randomUUID: the console may be opened over plain http (no secure context). */
function randomId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** One id per tab (sessionStorage) and one per browser (localStorage); storage may be refused. */
function storedId(storage: () => Storage, key: string): string {
  try {
    const existing = storage().getItem(key);
    if (existing) return existing;
    const id = randomId();
    storage().setItem(key, id);
    return id;
  } catch {
    return randomId();
  }
}
const sessionId = storedId(() => sessionStorage, 'flagship.telemetry.session');
const installId = storedId(() => localStorage, 'flagship.telemetry.install');

/** The signed-in user (events carry it; the server keeps only its hash), undefined when signed out. */
export function setTelemetryUser(id: string | undefined): void {
  userId = id;
}

function record(event: string, properties: Record<string, string | number | boolean | undefined>): void {
  queue.push({
    source: 'console',
    siteId: SITE_ID,
    sessionId,
    installId,
    ...(userId ? { userId } : {}),
    event,
    occurredAt: Date.now(),
    platform: 'web',
    apiOrigin: location.origin,
    // Absent values left out: the server keeps properties as a JSON object.
    properties: Object.fromEntries(Object.entries(properties).filter(([, v]) => v !== undefined)) as AdminEvent['properties'],
  });
  if (queue.length >= MAX_BATCH) flush();
  else timer ??= setTimeout(flush, FLUSH_MS);
}

/** Sends what is queued; keepalive lets the last batch leave with a closing tab. */
export function flush(): void {
  if (timer) clearTimeout(timer);
  timer = undefined;
  while (queue.length) {
    const batch = queue.splice(0, MAX_BATCH);
    void fetch('/ingest/admin-events', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(batch),
      credentials: 'omit',
      keepalive: true,
    }).catch(() => undefined);
  }
}

addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'hidden') flush();
});

/** Called by the router on every screen change: the routes table's screen name, never raw ids. */
export function screenViewed(screen: string, projectId?: string): void {
  record('screen_viewed', { screen, projectId });
}

/** A flag's detail was looked at (the funnel's second step). */
export function flagViewed(projectId: string, flagKey: string): void {
  record('flag_viewed', { projectId, flagKey });
}

/** The user did what the console is for (the funnel's last step): e.g. `action: 'flag_toggled'`. */
export function activation(projectId: string, action: string): void {
  record('activation', { projectId, action });
}
