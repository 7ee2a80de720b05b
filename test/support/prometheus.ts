import http from 'node:http';
import { eventually } from './harness';

/**
 * The Prometheus server scripts/test-infra.sh starts, and the fixture exporters it scrapes every
 * second: a test file sets a gauge per flag key (keys are unique per test), waits until
 * Prometheus has scraped it, and points a guard at it.
 */
export function requirePrometheus(): { url: string; exporterPorts: number[] } {
  const { PROMETHEUS_URL, PROMETHEUS_EXPORTER_PORTS } = process.env;
  if (!PROMETHEUS_URL || !PROMETHEUS_EXPORTER_PORTS) throw new Error('Guard tests need the real Prometheus: `source scripts/test-infra.sh up` first.');
  return { url: PROMETHEUS_URL, exporterPorts: PROMETHEUS_EXPORTER_PORTS.split(',').map(Number) };
}

export const GUARD_METRIC = 'guard_fixture_error_ratio';

export interface FixtureExporter {
  /** Exposes `guard_fixture_error_ratio{flag_key}`; resolves once Prometheus answers that value. */
  set(flagKey: string, value: number): Promise<void>;
  close(): Promise<void>;
}

export async function startFixtureExporter(): Promise<FixtureExporter> {
  const { url, exporterPorts } = requirePrometheus();
  const gauges = new Map<string, number>();
  const server = http.createServer((_req, res) => {
    const lines = [`# TYPE ${GUARD_METRIC} gauge`, ...[...gauges].map(([key, value]) => `${GUARD_METRIC}{flag_key=${JSON.stringify(key)}} ${value}`)];
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(`${lines.join('\n')}\n`);
  });
  await listenOnFreePort(server, exporterPorts);
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

/** Test files running at once (jest workers) each take one of the scraped ports. */
async function listenOnFreePort(server: http.Server, ports: number[]): Promise<void> {
  for (const port of ports) {
    const listening = await new Promise<boolean>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(false) : reject(error));
      server.once('error', onError).listen(port, '127.0.0.1', () => {
        server.off('error', onError);
        resolve(true);
      });
    });
    if (listening) return;
  }
  throw new Error(`every fixture exporter port is taken: ${ports.join(', ')}`);
}
