import { randomBytes } from 'node:crypto';
import { hashTargetingKey } from '../../api/features/evaluation/recorder';
import type { TestApp } from '../support/harness';

/**
 * Known rows put straight into the raw ClickHouse tables (the materialized views fill the
 * rollups), so the analytics tests can assert exact numbers. Timestamps go in as
 * 'YYYY-MM-DD hh:mm:ss.sss' UTC strings: JSONEachRow misreads bare integers.
 */

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

export const chTime = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
export const user = (name: string) => hashTargetingKey(name);
export const eventId = () => randomBytes(8).toString('hex');

export async function insertRows(app: TestApp, table: string, rows: Record<string, unknown>[]): Promise<void> {
  await app.platform.analytics.client.insert({ table, values: rows, format: 'JSONEachRow' });
}

export interface Tenant {
  projectId: string;
  serviceId: string;
}

export function evaluationRow(t: Tenant, e: { at: number; flagKey: string; value: unknown; user?: string; latencyMs?: number; environment?: string; reason?: string }) {
  return {
    timestamp: chTime(e.at),
    project_id: t.projectId,
    service_id: t.serviceId,
    environment: e.environment ?? 'production',
    flag_key: e.flagKey,
    reason: e.reason ?? 'TARGETING_MATCH',
    variant: '',
    value: JSON.stringify(e.value),
    latency_ms: e.latencyMs ?? 1,
    error_code: '',
    rule_id: '',
    rollout_side: '',
    targeting_key_hash: e.user ? user(e.user) : '',
    source: 'rest',
  };
}

export function outcomeRow(t: Tenant, e: { at: number; event: string; user?: string; value?: number | null; flags?: Record<string, unknown>; environment?: string }) {
  return {
    timestamp: chTime(e.at),
    project_id: t.projectId,
    service_id: t.serviceId,
    environment: e.environment ?? 'production',
    event: e.event,
    targeting_key_hash: e.user ? user(e.user) : '',
    value: e.value ?? null,
    flags: Object.fromEntries(Object.entries(e.flags ?? {}).map(([k, v]) => [k, JSON.stringify(v)])),
    origin: 'track',
    event_id: eventId(),
  };
}

export function browserRow(
  t: Tenant,
  e: { at: number; type: string; session: string; visitor?: string; url?: string; name?: string; value?: number | null; flags?: Record<string, unknown>; data?: unknown },
) {
  return {
    timestamp: chTime(e.at),
    received_at: chTime(e.at),
    project_id: t.projectId,
    service_id: t.serviceId,
    type: e.type,
    url: e.url ?? 'https://shop.example.com/',
    referrer: '',
    session_id: e.session,
    visitor_hash: e.visitor ? user(e.visitor) : '',
    name: e.name ?? '',
    value: e.value ?? null,
    flags: Object.fromEntries(Object.entries(e.flags ?? {}).map(([k, v]) => [k, JSON.stringify(v)])),
    data: JSON.stringify(e.data ?? {}),
    country: 'DE',
    browser: 'Firefox',
    os: 'Linux',
    device: 'desktop',
    event_id: eventId(),
  };
}

export function vitalRow(t: Tenant, e: { at: number; name: string; value: number; rating?: string; origin?: 'sdk' | 'browser'; flags?: Record<string, unknown>; environment?: string }) {
  return {
    timestamp: chTime(e.at),
    project_id: t.projectId,
    service_id: t.serviceId,
    environment: e.environment ?? (e.origin === 'sdk' ? 'production' : ''),
    origin: e.origin ?? 'browser',
    name: e.name,
    value: e.value,
    rating: e.rating ?? '',
    active_flags: Object.fromEntries(Object.entries(e.flags ?? {}).map(([k, v]) => [k, JSON.stringify(v)])),
    session_id: '',
    url: '',
    event_id: eventId(),
  };
}

export function adminRow(projectId: string, e: { at: number; user: string; event: string }) {
  return {
    occurred_at: chTime(e.at),
    received_at: chTime(e.at),
    site_id: 'svc_admin_prod',
    source: 'console',
    session_id: `s-${e.user}`,
    install_id: '',
    user_hash: user(e.user),
    event: e.event,
    project_id: projectId,
    app_version: '1.0.0',
    build_number: '1',
    app_variant: '',
    platform: 'web',
    api_origin: '',
    properties: JSON.stringify({ projectId }),
    event_id: eventId(),
  };
}
