import { openAnalytics } from '../../analytics/client';
import { startTestApp } from '../support/harness';

/**
 * Shutdown flushes every table: rows recorded just before the process stops are in ClickHouse
 * afterwards, though no batch filled and no interval passed.
 */
it('writes every buffered row of every table when the platform stops', async () => {
  const app = await startTestApp({ ANALYTICS_FLUSH_MS: '600000', EVAL_EVENTS_FLUSH_MS: '600000', DEMO_SEED: 'true' });
  const { CHDB_PATH, CLICKHOUSE_DATABASE } = app.platform.config;
  const sink = app.platform.analyticsWriter;
  const projectId = `prj_shutdown_${Date.now()}`;
  const now = Date.now();
  for (let i = 0; i < 3; i++) {
    expect(
      sink.record('outcome_events', {
        timestamp: now, projectId, serviceId: 's', environment: 'production', event: 'purchase', targetingKeyHash: '',
        value: 1, flags: {}, origin: 'track', eventId: `o${i}`,
      }),
    ).toBe(true);
  }
  sink.record('sdk_diagnostics', {
    timestamp: now, projectId, serviceId: 's', environment: 'production', totalEvaluations: 5, cacheHits: 1, cacheHitRatio: 0.2, trackedFlags: 2, eventId: 'd',
  });
  // An evaluation (the demo service answers anonymous callers) goes to the evaluation_events writer.
  const [demoService] = app.platform.demo.demoServiceIds();
  const evaluated = await app.request('POST', '/api/flags/evaluate', { listener: 'data', body: { flagKey: 'shutdown-probe', serviceId: demoService, context: { targetingKey: 'u' } } });
  expect(evaluated.body).toMatchObject({ reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND' });
  const stats = app.platform.analyticsWriter.stats();
  expect(stats.outcome_events).toMatchObject({ buffered: 3, written: 0 });
  expect(stats.sdk_diagnostics).toMatchObject({ buffered: 1, written: 0 });
  expect(stats.evaluation_events).toMatchObject({ buffered: 1, written: 0 });

  await app.stop({ keepAnalytics: true });
  expect(app.platform.analyticsWriter.stats().outcome_events).toMatchObject({ buffered: 0, written: 3, dropped: 0 });

  const analytics = await openAnalytics({ database: CLICKHOUSE_DATABASE, chdbPath: CHDB_PATH as string });
  try {
    const count = async (query: string, params: Record<string, string> = { projectId }) => {
      const rs = await analytics.client.query({ query, query_params: params, format: 'JSONEachRow' });
      return Number(((await rs.json()) as { n: number | string }[])[0].n);
    };
    expect(await count('SELECT count() AS n FROM outcome_events WHERE project_id = {projectId:String}')).toBe(3);
    expect(await count('SELECT sum(events) AS n FROM outcome_minutes WHERE project_id = {projectId:String}')).toBe(3);
    expect(await count('SELECT count() AS n FROM sdk_diagnostics WHERE project_id = {projectId:String}')).toBe(1);
    expect(await count('SELECT count() AS n FROM evaluation_events WHERE service_id = {service:String} AND flag_key = {flag:String}', { service: demoService, flag: 'shutdown-probe' })).toBe(1);
  } finally {
    await analytics.client.command({ query: `DROP DATABASE IF EXISTS ${CLICKHOUSE_DATABASE}` }).catch(() => undefined);
    await analytics.close();
  }
});
