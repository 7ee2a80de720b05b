import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Closes keep-alive connections that stayed idle for a whole sweep: between `idleMs` and twice
 * that after their last byte read or written. It stands in for Node's `keepAliveTimeout`, which
 * re-arms a socket timer as every answer finishes and disarms it as the next request arrives:
 * two timers per request, a few percent of the data plane's CPU per request (docs/data-plane.md,
 * The lean path).
 * Here one timer per listener walks its connections instead.
 *
 * A connection is left alone while a response is under way or unsent bytes wait in its buffer
 * (streams, slow readers), and until it has been answered once: a new connection's first request
 * is bounded by the listener's headers and request timeouts, as before.
 */
export function closeIdleKeepAlive(server: Server, idleMs: number): void {
  /** Bytes read plus bytes written at the previous sweep, per open connection. */
  const connections = new Map<Socket, number>();
  server.on('connection', (socket: Socket) => {
    connections.set(socket, -1);
    socket.once('close', () => connections.delete(socket));
  });
  const sweep = setInterval(() => {
    for (const [socket, trafficBefore] of connections) {
      // Written bytes count too: an answer finished since the last sweep starts the idle time
      // again, however long ago its request was read.
      const traffic = socket.bytesRead + socket.bytesWritten;
      const answering = (socket as { _httpMessage?: unknown })._httpMessage != null || socket.writableLength > 0;
      if (traffic === trafficBefore && !answering && socket.bytesWritten > 0) {
        socket.destroy();
        connections.delete(socket);
      } else connections.set(socket, traffic);
    }
  }, idleMs);
  sweep.unref();
  server.once('close', () => clearInterval(sweep));
}
