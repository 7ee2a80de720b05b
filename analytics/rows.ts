/**
 * The rows every analytics producer hands the batched writer, one type per ClickHouse table
 * (analytics/schema). Field names are the columns' in camelCase; timestamps are epoch ms.
 * Maps of flag key -> value carry the value as JSON text, as the tables keep it.
 * `eventId` is the per-event dedup key (a retried batch must not count twice).
 */
export interface OutcomeRow {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  event: string;
  targetingKeyHash: string;
  value: number | null;
  flags: Record<string, string>;
  origin: 'track' | 'sdk-telemetry' | 'otlp';
  eventId: string;
}

export interface SdkTelemetryRow {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  flagKey: string;
  variant: string;
  evaluations: number;
  cacheHits: number;
  cacheMisses: number;
  avgLatencyMs: number;
  eventId: string;
}

export interface SdkDiagnosticsRow {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  totalEvaluations: number;
  cacheHits: number;
  cacheHitRatio: number;
  trackedFlags: number;
  eventId: string;
}

export interface WebVitalRow {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  origin: 'sdk' | 'browser';
  name: 'lcp' | 'cls' | 'inp' | 'ttfb' | 'fcp';
  value: number;
  rating: '' | 'good' | 'needs-improvement' | 'poor';
  activeFlags: Record<string, string>;
  sessionId: string;
  url: string;
  eventId: string;
}

export interface ClientErrorRow {
  timestamp: number;
  projectId: string;
  serviceId: string;
  environment: string;
  origin: 'sdk' | 'browser';
  /** hashTargetingKey(message): groups repeats of one error. */
  fingerprint: string;
  message: string;
  stack: string;
  activeFlags: Record<string, string>;
  sessionId: string;
  url: string;
  eventId: string;
}

export type BrowserEventType = 'pageview' | 'webvital' | 'click' | 'error' | 'scroll' | 'custom';

/** Browser web vitals and errors reach web_vitals and client_errors through views (023): write them here only. */
export interface BrowserEventRow {
  timestamp: number;
  receivedAt: number;
  projectId: string;
  serviceId: string;
  type: BrowserEventType;
  url: string;
  referrer: string;
  sessionId: string;
  visitorHash: string;
  name: string;
  value: number | null;
  flags: Record<string, string>;
  /** The event's data object as JSON text. */
  data: string;
  country: string;
  browser: string;
  os: string;
  device: string;
  eventId: string;
}

export interface AdminEventRow {
  occurredAt: number;
  receivedAt: number;
  siteId: string;
  source: string;
  sessionId: string;
  installId: string;
  userHash: string;
  event: string;
  projectId: string;
  appVersion: string;
  buildNumber: string;
  appVariant: string;
  platform: string;
  apiOrigin: string;
  /** JSON text. */
  properties: string;
  eventId: string;
}

/**
 * The latest attributes of one targeting key (032_recent_contexts): the contexts simulate replays.
 * `attributes` is JSON object text, already through the deny-list and the size cap.
 */
export interface RecentContextRow {
  seenAt: number;
  serviceId: string;
  environment: string;
  targetingKey: string;
  attributes: string;
}

/** Table name -> the row it takes. */
export interface AnalyticsRows {
  outcome_events: OutcomeRow;
  sdk_telemetry: SdkTelemetryRow;
  sdk_diagnostics: SdkDiagnosticsRow;
  web_vitals: WebVitalRow;
  client_errors: ClientErrorRow;
  browser_events: BrowserEventRow;
  admin_events: AdminEventRow;
  recent_contexts: RecentContextRow;
}

export type AnalyticsTable = keyof AnalyticsRows;

/**
 * Where producers put rows: never blocks, never throws. False when the row was refused because
 * the writer's memory bound is reached (the caller answers 503 rather than accept and lose it).
 */
export interface AnalyticsSink {
  record<T extends AnalyticsTable>(table: T, row: AnalyticsRows[T]): boolean;
  /** Rows of the table `record` would take now, for a producer that must take all of a request or none. */
  room(table: AnalyticsTable): number;
}
