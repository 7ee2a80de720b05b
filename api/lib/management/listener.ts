import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from '../../infra/logger';
import type { Readiness } from './readiness';

export interface ManagementListener {
  url: string;
  close(): Promise<void>;
}

/**
 * The management listener (docs/operations.md#management-listener): GET /metrics, /livez and
 * /readyz on MANAGEMENT_PORT, on every role. A plain node:http handler outside the public
 * Express chain, so scrapes and probes cost no authentication or rate limiting and keep
 * answering when the public listeners are saturated. It has no authentication: like the other
 * listeners it binds HOST (loopback by default), and is meant for the internal network.
 */
export async function startManagementListener(opts: { host: string; port: number; registry: Registry; readiness: Readiness; logger: Logger }): Promise<ManagementListener> {
  const server = http.createServer((req, res) => void answer(req, res).catch((error) => {
    opts.logger.error({ err: error }, 'management request failed');
    if (!res.headersSent) send(res, 500, 'application/json', JSON.stringify({ error: 'Internal server error' }));
    else res.destroy();
  }));
  server.keepAliveTimeout = 5_000;

  async function answer(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'application/json', JSON.stringify({ error: 'Method Not Allowed' }), { Allow: 'GET, HEAD' });
    switch (path) {
      case '/metrics':
        return send(res, 200, opts.registry.contentType, await opts.registry.metrics());
      case '/livez':
        return send(res, 200, 'application/json', JSON.stringify({ status: 'ok' }));
      case '/readyz': {
        const { ready, reasons } = opts.readiness.state();
        return send(res, ready ? 200 : 503, 'application/json', JSON.stringify(ready ? { status: 'ready' } : { status: 'unready', reasons }));
      }
      default:
        return send(res, 404, 'application/json', JSON.stringify({ error: 'Not Found', message: 'GET /metrics, /livez or /readyz' }));
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  opts.logger.info({ listener: 'management', url }, 'listening');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function send(res: http.ServerResponse, status: number, contentType: string, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store', ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
