import { openAnalytics, type Analytics } from '../../analytics/client';
import { applyAnalyticsRetention, migrateAnalytics } from '../../analytics/migrate';
import { workerChdbPath } from '../support/chdb-path';

/** ANALYTICS_RETENTION_DAYS / ANALYTICS_ROLLUP_RETENTION_DAYS become the tables' TTLs (chDB). */

let analytics: Analytics;
const database = `retention_${process.pid}`;

beforeAll(async () => {
  analytics = await openAnalytics({ database, chdbPath: workerChdbPath() });
  await migrateAnalytics(analytics);
});

afterAll(async () => {
  await analytics.client.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await analytics.close();
});

/** Days of every table that has a TTL, by table name. */
async function ttlDays(): Promise<Record<string, number>> {
  const rs = await analytics.client.query({
    query: `SELECT name, extract(engine_full, 'toIntervalDay[(]([0-9]+)[)]') AS days FROM system.tables
            WHERE database = currentDatabase() AND engine_full LIKE '% TTL %'`,
    format: 'JSONEachRow',
  });
  return Object.fromEntries(((await rs.json()) as { name: string; days: string }[]).map((r) => [r.name, Number(r.days)]));
}

const RAW = ['browser_events', 'client_errors', 'evaluation_events', 'outcome_events', 'sdk_diagnostics', 'sdk_telemetry', 'web_vitals'];
const ROLLUP = ['admin_events', 'browser_minutes', 'evaluation_minutes', 'outcome_minutes', 'web_vital_minutes'];

describe('analytics retention from configuration', () => {
  it('leaves the schema defaults (90 / 400) alone, changes what differs, and only once', async () => {
    expect(await applyAnalyticsRetention(analytics, { raw: 90, rollup: 400 })).toEqual([]);

    const changed = await applyAnalyticsRetention(analytics, { raw: 30, rollup: 200 });
    expect([...changed].sort()).toEqual([...RAW, ...ROLLUP].sort());
    const days = await ttlDays();
    // Every table with a TTL is governed by the settings, except the health probe's own day and
    // the recent contexts' own week (simulate's replay window, docs/simulate.md).
    expect(days).toEqual({
      ...Object.fromEntries(RAW.map((t) => [t, 30])),
      ...Object.fromEntries(ROLLUP.map((t) => [t, 200])),
      health_probe: 1,
      recent_contexts: 7,
    });
    expect(await applyAnalyticsRetention(analytics, { raw: 30, rollup: 200 })).toEqual([]);

    expect(await applyAnalyticsRetention(analytics, { raw: 30, rollup: 365 })).toEqual(expect.arrayContaining(ROLLUP));
    expect(await ttlDays()).toMatchObject({ evaluation_events: 30, evaluation_minutes: 365, admin_events: 365 });
  });

  it('expires rows by the changed TTL', async () => {
    await applyAnalyticsRetention(analytics, { raw: 7, rollup: 400 });
    const day = 24 * 3600 * 1000;
    const at = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
    await analytics.client.insert({
      table: 'sdk_diagnostics',
      values: [
        { timestamp: at(Date.now() - 10 * day), project_id: 'p_ttl', service_id: 's', environment: 'production', total_evaluations: 1, cache_hits: 0, cache_hit_ratio: 0, tracked_flags: 1, event_id: 'old' },
        { timestamp: at(Date.now() - 1 * day), project_id: 'p_ttl', service_id: 's', environment: 'production', total_evaluations: 1, cache_hits: 0, cache_hit_ratio: 0, tracked_flags: 1, event_id: 'new' },
      ],
      format: 'JSONEachRow',
    });
    await analytics.client.command({ query: 'OPTIMIZE TABLE sdk_diagnostics FINAL' });
    const rs = await analytics.client.query({ query: "SELECT event_id FROM sdk_diagnostics WHERE project_id = 'p_ttl'", format: 'JSONEachRow' });
    expect(await rs.json()).toEqual([{ event_id: 'new' }]);
  });
});
