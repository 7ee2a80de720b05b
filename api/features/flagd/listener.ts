import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../infra/logger';
import type { StreamTaker } from './unary';

/**
 * One flagd port (docs/local-evaluation.md#ports): gRPC needs HTTP/2 (h2c without TLS), Connect
 * clients speak HTTP/1.1 or HTTP/2. Without TLS each connection's first bytes say which: HTTP/2's
 * connection preface starts with `PRI`, and the socket goes to the HTTP/2 or the HTTP/1.1 server.
 * With TLS, ALPN decides (an HTTP/2 server that also answers HTTP/1.1). HTTP/2 answers the
 * clients' keepalive PINGs itself.
 */

export type FlagdHandler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => void;

export interface FlagdListenerOptions {
  name: string;
  host: string;
  port: number;
  tls?: { cert: string; key: string };
  /** Takes HTTP/2 streams before the compatibility layer hands them to `handler` as requests (unary.ts). */
  streams?: StreamTaker;
  /** Open connections (server.maxConnections); further ones are closed on accept. */
  maxConnections: number;
  headersTimeoutMs: number;
  logger: Logger;
}

export interface FlagdListener {
  url: string;
  port: number;
  /** Stops accepting, asks HTTP/2 clients to go (GOAWAY) and closes what is left after graceMs. */
  close(graceMs: number): Promise<void>;
}

const HTTP2_PREFACE_START = 'PRI';

export async function startFlagdListener(handler: FlagdHandler, options: FlagdListenerOptions): Promise<FlagdListener> {
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const h2options = { maxSessionMemory: 32, settings: { maxHeaderListSize: 16 * 1024 } };
  let server: net.Server;
  let h1: http.Server | undefined;
  let h2: http2.Http2Server | http2.Http2SecureServer;
  if (options.tls) {
    h2 = http2.createSecureServer({ ...h2options, cert: options.tls.cert, key: options.tls.key, allowHTTP1: true }, handler);
    h2.on('secureConnection', track);
    server = h2;
  } else {
    h1 = http.createServer(
      {
        maxHeaderSize: 16 * 1024,
        headersTimeout: options.headersTimeoutMs,
        requestTimeout: 0,
        // Node checks the header timeout on this interval; keep it well under the timeout.
        connectionsCheckingInterval: Math.min(5_000, Math.ceil(options.headersTimeoutMs / 4)),
      },
      handler,
    );
    // It never listens itself: 'listening' starts its check of header timeouts on the sockets it is handed.
    h1.emit('listening');
    h2 = http2.createServer(h2options, handler);
    const plain = { h1, h2 };
    server = net.createServer((socket) => {
      track(socket);
      // A client must say which protocol it speaks as soon as a request's headers are due.
      socket.setTimeout(options.headersTimeoutMs, () => socket.destroy());
      socket.once('data', (chunk) => {
        socket.setTimeout(0);
        socket.pause();
        socket.unshift(chunk);
        if (chunk.subarray(0, HTTP2_PREFACE_START.length).toString('latin1') === HTTP2_PREFACE_START) {
          // The HTTP/2 session reads the socket itself, including what was put back.
          plain.h2.emit('connection', socket);
        } else {
          plain.h1.emit('connection', socket);
          socket.resume();
        }
      });
      socket.on('error', () => socket.destroy());
    });
  }
  if (options.streams) takeStreamsFirst(h2, options.streams);
  h2.on('session', (session: http2.Http2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  // A broken connection is the client's problem, not an error of ours.
  h2.on('sessionError', () => undefined);
  server.maxConnections = options.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `${options.tls ? 'https' : 'http'}://${host}:${port}`;
  options.logger.info({ listener: options.name, url }, 'listening');
  return {
    url,
    port,
    async close(graceMs) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of sessions) session.close();
      h1?.closeIdleConnections();
      const force = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, graceMs);
      await closed;
      clearTimeout(force);
      h1?.close();
    },
  };
}

type StreamListener = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => void;

/**
 * Puts `take` in front of the server's 'stream' listener, the compatibility layer that turns each
 * stream into a request for `handler`: a stream `take` serves never becomes a request.
 */
function takeStreamsFirst(h2: http2.Http2Server | http2.Http2SecureServer, take: StreamTaker): void {
  const compat = h2.listeners('stream') as StreamListener[];
  h2.removeAllListeners('stream');
  h2.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    if (take(stream, headers)) return;
    for (const listener of compat) listener.call(h2, stream, headers, flags, rawHeaders);
  });
}
