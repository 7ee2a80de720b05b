import { EventSource } from 'eventsource';
import { eventually, startTestApp, type TestApp } from '../support/harness';
import { expectOfrepSingle } from '../support/ofrep-schema';

let app: TestApp;
let demoServiceId: string;

beforeAll(async () => {
  app = await startTestApp({ DEMO_SEED: 'true' });
  const demo = await app.request('GET', '/api/demo');
  demoServiceId = demo.body.services[0].serviceId;
});
afterAll(() => app?.stop());

const grid = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `px-${i}` }));

describe('the demo service on the data plane (anonymous batch evaluation and stream)', () => {
  it('evaluates a 4,096-flag batch without a token, items using `key`', async () => {
    for (const listener of ['control', 'data'] as const) {
      const res = await app.request('POST', '/api/flags/evaluate/batch?debug=true', {
        listener,
        body: { serviceId: demoServiceId, environment: 'development', flags: grid(4096), context: { targetingKey: 'visitor' } },
      });
      expect(res.status).toBe(200);
      expect(res.body.results).toHaveLength(4096);
      expect(res.body.results[0]).toEqual({ flagKey: 'px-0', value: false, reason: 'DEFAULT' });
      expect(res.body.results[4095]).toEqual({ flagKey: 'px-4095', value: false, reason: 'DEFAULT' });
      expect(res.body._debug.totalMs).toEqual(expect.any(Number));
    }
    const tooMany = await app.request('POST', '/api/flags/evaluate/batch', { body: { serviceId: demoServiceId, flags: grid(4097) } });
    expect(tooMany.status).toBe(400);
    // A missing cell on the demo service is FLAG_NOT_FOUND, not 401: the whole service is public.
    const missing = await app.request('POST', '/api/flags/evaluate', { listener: 'data', body: { flagKey: 'px-99999', serviceId: demoServiceId, defaultValue: true } });
    expect(missing.status).toBe(200);
    expect(missing.body).toMatchObject({ value: true, reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND' });
  });

  it('evaluates single demo flags without a token over REST and OFREP, and reports demo in sdk-config', async () => {
    const rest = await app.request('POST', '/api/flags/evaluate', { listener: 'data', body: { flagKey: 'px-7', serviceId: demoServiceId } });
    expect(rest.body).toEqual({ flagKey: 'px-7', value: false, reason: 'DEFAULT' });
    const ofrep = await app.request('POST', '/api/ofrep/v1/evaluate/flags/px-7', { listener: 'data', headers: { 'x-service-id': demoServiceId }, body: { context: {} } });
    expect(ofrep.status).toBe(200);
    // Demo cells start disabled: OFREP says DISABLED where REST says DEFAULT
    // (docs/evaluation.md#reasons).
    expect(ofrep.body).toMatchObject({ key: 'px-7', value: false, reason: 'DISABLED' });
    expectOfrepSingle(ofrep);
    const config = await app.request('GET', `/api/sdk-config?serviceId=${demoServiceId}`, { listener: 'data' });
    expect(config.body).toMatchObject({ demo: true, flagCount: 4096, limits: { batch: 4096 } });
  });

  it('streams demo writes to an anonymous EventSource: connected, then flag-update with the full flag', async () => {
    const messages: any[] = [];
    const source = new EventSource(`${app.urls.data}/api/flags/stream?serviceId=${demoServiceId}&environment=development`);
    source.onmessage = (e) => messages.push(JSON.parse(e.data));
    try {
      await eventually(async () => messages.length >= 1);
      expect(messages[0]).toMatchObject({ type: 'connected', serviceId: demoServiceId });
      const write = await app.request('PATCH', '/api/flags/bulk', {
        body: { flags: [{ key: 'px-42', serviceId: demoServiceId, environment: 'development', updates: { enabled: true } }] },
      });
      expect(write.status).toBeLessThan(300);
      const update = await eventually(async () => messages.find((m) => m.type === 'flag-update' && m.flagKey === 'px-42'));
      expect(update.flag).toMatchObject({ key: 'px-42', enabled: true, updatedAt: expect.any(String) });
      const evaluated = await app.request('POST', '/api/flags/evaluate', { listener: 'data', body: { flagKey: 'px-42', serviceId: demoServiceId, defaultValue: 'x' } });
      expect(evaluated.body).toEqual({ flagKey: 'px-42', value: false, reason: 'DEFAULT' });
    } finally {
      source.close();
    }
  });
});
