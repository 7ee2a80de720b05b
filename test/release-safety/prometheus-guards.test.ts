import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PrometheusGuard } from '../../api/domain/guards';
import { PrometheusGuards, renderGuardQuery, withGuards } from '../../api/lib/release-safety/prometheus-guards';
import { requirePrometheus } from '../support/prometheus';

/**
 * The guard checker on its own: templating and escaping (checked against the real Prometheus,
 * which must read an escaped key back as the same string), and the answers that cannot be judged
 * from servers that misbehave.
 */

const context = { flagKey: 'checkout', environment: 'production', serviceId: 'svc_1', startMs: 1_700_000_000_500, endMs: 1_700_000_300_400 };
const guardOn = (url: string, query = 'vector(1)'): PrometheusGuard => ({ name: 'g', source: 'prometheus', url, query, failWhen: { op: '>', threshold: 0.5 } });

async function serve(handler: http.RequestListener): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('guard query templating', () => {
  it('renders stage start as unix seconds and the window as a PromQL duration in seconds', () => {
    expect(renderGuardQuery('x{f="{{flagKey}}",e="{{environment}}",s="{{serviceId}}"}[{{window}}] @ {{stageStart}} {{other}}', context)).toBe(
      'x{f="checkout",e="production",s="svc_1"}[300s] @ 1700000000 {{other}}',
    );
    expect(renderGuardQuery('[{{window}}]', { ...context, endMs: context.startMs })).toBe('[1s]');
  });

  it('keeps a hostile key inside its string: Prometheus reads it back unchanged', async () => {
    const { url } = requirePrometheus();
    const flagKey = 'a"} or vector(666) or x{y="\\\n';
    const rendered = renderGuardQuery('label_replace(vector(1), "key", "{{flagKey}}", "", "")', { ...context, flagKey });
    const answer = (await (await fetch(`${url}/api/v1/query?query=${encodeURIComponent(rendered)}`)).json()) as { status: string; data: { result: { metric: { key: string }; value: [number, string] }[] } };
    expect(answer.status).toBe('success');
    expect(answer.data.result).toHaveLength(1);
    expect(answer.data.result[0].metric.key).toBe(flagKey);
    expect(answer.data.result[0].value[1]).toBe('1');
  });
});

describe('guard answers that cannot be judged', () => {
  it('waits on an unreachable server, a timeout, an oversized answer and a non-Prometheus answer', async () => {
    const closed = await serve(() => undefined);
    await closed.close();
    const slow = await serve(() => undefined);
    const big = await serve((_req, res) => res.end(JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [], pad: 'x'.repeat(4_096) } })));
    const html = await serve((_req, res) => res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>'));
    const inf = await serve((_req, res) => res.end(JSON.stringify({ status: 'success', data: { resultType: 'scalar', result: [1, '+Inf'] } })));
    try {
      const guards = new PrometheusGuards({ allowedOrigins: [closed.url, slow.url, big.url, html.url, inf.url], timeoutMs: 1_000, maxResponseBytes: 1_024 });
      const [unreachable, timedOut, oversized, notPrometheus, infinite] = await guards.check([guardOn(closed.url), guardOn(slow.url), guardOn(big.url), guardOn(html.url), guardOn(inf.url)], context);
      expect(unreachable).toMatchObject({ decision: 'wait', value: null });
      expect(unreachable.reason).toMatch(/^the server could not be reached \(ECONNREFUSED\)/);
      expect(timedOut).toMatchObject({ decision: 'wait', reason: 'no answer within 1 s' });
      expect(oversized).toMatchObject({ decision: 'wait', reason: 'the answer is larger than 1024 bytes' });
      expect(notPrometheus).toMatchObject({ decision: 'wait', reason: 'not a Prometheus answer (HTTP 502)' });
      expect(infinite).toMatchObject({ decision: 'fail', value: Infinity });
    } finally {
      await Promise.all([slow.close(), big.close(), html.close(), inf.close()]);
    }
  }, 30_000);

  it('refuses servers off the allow-list, at write time and at the gate', async () => {
    const guards = new PrometheusGuards({ allowedOrigins: ['http://prometheus.internal:9090'] });
    expect(guards.problems([guardOn('http://prometheus.internal:9090/prefix'), guardOn('http://prometheus.internal:9091')], 'body.guards')).toEqual([
      { path: 'body.guards.1.url', message: 'http://prometheus.internal:9091 is not in PROMETHEUS_URL_ALLOWLIST' },
    ]);
    const none = new PrometheusGuards({ allowedOrigins: [] });
    const [answer] = await none.check([guardOn('http://prometheus.internal:9090')], context);
    expect(answer).toMatchObject({ decision: 'wait', reason: expect.stringMatching(/no PROMETHEUS_URL_ALLOWLIST/) });
  });

  it('a breached guard fails a gate, one that cannot be judged holds a passing gate at wait', () => {
    const gate = { decision: 'pass' as const, reason: 'no harm shown' };
    const pass = { name: 'a', decision: 'pass' as const, reason: '1 not > 2', value: 1 };
    const wait = { name: 'b', decision: 'wait' as const, reason: 'no data: the query answered no series', value: null };
    const fail = { name: 'c', decision: 'fail' as const, reason: '3 > 2', value: 3 };
    expect(withGuards(gate, [])).toEqual(gate);
    expect(withGuards(gate, [pass])).toEqual({ ...gate, guards: [pass] });
    expect(withGuards(gate, [pass, wait])).toEqual({ decision: 'wait', reason: 'guard "b" cannot be judged: no data: the query answered no series', guards: [pass, wait] });
    expect(withGuards(gate, [wait, fail])).toMatchObject({ decision: 'fail', reason: 'guard "c" breached: 3 > 2' });
    expect(withGuards({ decision: 'fail', reason: 'error rate: …' }, [wait])).toMatchObject({ decision: 'fail', reason: 'error rate: …' });
  });
});
