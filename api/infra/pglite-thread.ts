import { parentPort, workerData } from 'node:worker_threads';

/**
 * The embedded profile's PGlite and its wire-protocol server, on a thread of their own
 * (api/infra/postgres.ts starts it). PGlite runs Postgres as WebAssembly on the thread that owns
 * it: on the main thread every query's execution competed with request handling, the outbox relay
 * and the Temporal worker (a quarter of the main thread's time in bench:propagation).
 */
const SHARED_BUFFERS = '32MB';

interface Start {
  dir: string;
}

async function main() {
  const { dir } = workerData as Start;
  const { PGlite } = await import('@electric-sql/pglite');
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
  // Shared buffers are memory of the WebAssembly instance that is never given back; the data's
  // pages stay in the OS's file cache anyway. 16 MB halved webhook deliveries under bursts of
  // writes (docs/operations.md#resource-use-at-idle).
  const db = await PGlite.create(dir, { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${SHARED_BUFFERS}`] });
  const server = new PGLiteSocketServer({ db, port: 0, host: '127.0.0.1' });
  await server.start();
  parentPort!.on('message', async (message: { type: string }) => {
    if (message.type !== 'stop') return;
    await server.stop();
    await db.close();
    parentPort!.postMessage({ type: 'stopped' });
  });
  parentPort!.postMessage({ type: 'ready', hostPort: server.getServerConn() });
}

main().catch((error: unknown) => {
  parentPort!.postMessage({ type: 'failed', message: error instanceof Error ? error.stack ?? error.message : String(error) });
});
