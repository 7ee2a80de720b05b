import http from 'node:http';
import { eventually } from './harness';

/**
 * The Prometheus server scripts/test-infra.sh starts, and the fixture exporter it scrapes every
 * second: a test sets a gauge per flag key, waits until Prometheus has scraped it, and points a
 * guard at it.
 */
export function requirePrometheus(): { url: string; exporterPort: number } {
  const { PROMETHEUS_URL, PROMETHEUS_EXPORTER_PORT } = process.env;
  if (!PROMETHEUS_URL || !PROMETHEUS_EXPORTER_PORT) throw new Error('Guard tests need the real Prometheus: `source scripts/test-infra.sh up` first.');
  return { url: PROMETHEUS_URL, exporterPort: Number(PROMETHEUS_EXPORTER_PORT) };
}

export const GUARD_METRIC = 'guard_fixture_error_ratio';

export interface FixtureExporter {
  /** Exposes `guard_fixture_error_ratio{flag_key}`; resolves once Prometheus answers that value. */
  set(flagKey: string, value: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFixtureExporter(): Promise<FixtureExporter> {
  const { url, exporterPort } = requirePrometheus();
  const gauges = new Map<string, number>();
  const server = http.createServer((_req, res) => {
    const lines = [`# TYPE ${GUARD_METRIC} gauge`, ...[...gauges].map(([key, value]) => `${GUARD_METRIC}{flag_key=${JSON.stringify(key)}} ${value}`)];
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(`${lines.join('\n')}\n`);
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(exporterPort, '127.0.0.1', resolve));
  return {
    async set(flagKey, value) {
      gauges.set(flagKey, value);
      const query = encodeURIComponent(`${GUARD_METRIC}{flag_key=${JSON.stringify(flagKey)}}`);
      await eventually(async () => {
        const answer = (await (await fetch(`${url}/api/v1/query?query=${query}`)).json()) as { data: { result: { value: [number, string] }[] } };
        return answer.data.result.length === 1 && Number(answer.data.result[0].value[1]) === value;
      }, 30_000, 250);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
