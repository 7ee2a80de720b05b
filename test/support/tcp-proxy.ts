import net from 'node:net';

/**
 * A TCP proxy in front of a shared test server, so a test can take "its" backend away without
 * stopping the server other tests use: `blackhole()` freezes every connection (bytes are held,
 * nothing is closed, like a dead network), `refuse()` resets them and stops listening (like a
 * stopped server: new connections are refused), `restore()` forwards again (new connections
 * only, as after a real outage).
 */
export interface TcpProxy {
  /** host:port clients connect to. */
  address: string;
  blackhole(): void;
  refuse(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: 'open' | 'blackhole' | 'refuse' = 'open';
  const pairs = new Set<[net.Socket, net.Socket | undefined]>();
  const server = net.createServer((client) => {
    client.on('error', () => undefined);
    if (mode === 'blackhole') {
      // Accepted and never answered.
      pairs.add([client, undefined]);
      client.pause();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    upstream.on('error', () => client.destroy());
    const pair: [net.Socket, net.Socket | undefined] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', drop);
    upstream.on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const closeAll = () => {
    for (const [client, upstream] of pairs) {
      client.resetAndDestroy();
      upstream?.destroy();
    }
    pairs.clear();
  };
  return {
    address: `127.0.0.1:${port}`,
    blackhole() {
      mode = 'blackhole';
      for (const [client, upstream] of pairs) {
        client.unpipe();
        upstream?.unpipe();
        client.pause();
        upstream?.pause();
      }
    },
    refuse() {
      mode = 'refuse';
      server.close();
      closeAll();
    },
    restore() {
      closeAll();
      if (mode === 'refuse') server.listen(port, '127.0.0.1');
      mode = 'open';
    },
    async close() {
      closeAll();
      if (mode !== 'refuse') await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
