import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { forbiddenAddressReason, OutboundClient, OutboundRequestError, parseIPv6, type Resolver } from '../../api/http/outbound';

/** The SSRF guard and the shared undici client, with private targets refused (the production default). */

interface Receiver {
  url: string;
  port: number;
  hits: string[];
  close(): Promise<void>;
}

async function startReceiver(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<Receiver> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hits,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('forbiddenAddressReason', () => {
  it.each([
    ['127.0.0.1', 'a loopback address'],
    ['127.255.0.9', 'a loopback address'],
    ['10.1.2.3', 'a private address'],
    ['172.16.0.1', 'a private address'],
    ['172.31.255.255', 'a private address'],
    ['192.168.1.1', 'a private address'],
    ['100.64.0.1', 'a carrier-grade NAT address'],
    ['100.127.255.254', 'a carrier-grade NAT address'],
    ['169.254.1.1', 'a link-local address'],
    ['169.254.169.254', 'a cloud metadata address'],
    ['0.0.0.0', 'an unspecified address'],
    ['224.0.0.1', 'a multicast address'],
    ['255.255.255.255', 'a reserved address'],
    ['::1', 'a loopback address'],
    ['::', 'an unspecified address'],
    ['fd00:ec2::254', 'a cloud metadata address'],
    ['fd12:3456::1', 'a unique-local address'],
    ['fc00::1', 'a unique-local address'],
    ['fe80::1', 'a link-local address'],
    ['ff02::1', 'a multicast address'],
    ['::ffff:127.0.0.1', 'a loopback address'],
    ['::ffff:7f00:1', 'a loopback address'],
    ['::ffff:169.254.169.254', 'a cloud metadata address'],
    ['64:ff9b::10.0.0.1', 'a private address'],
    ['2002:c0a8:0101::1', 'a private address'],
    ['[::1]', 'a loopback address'],
    ['fe80::1%eth0', 'a link-local address'],
  ])('refuses %s as %s', (address, reason) => {
    expect(forbiddenAddressReason(address)).toBe(reason);
  });

  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '2002:0808:0808::1'])(
    'allows the public address %s',
    (address) => {
      expect(forbiddenAddressReason(address)).toBeNull();
    },
  );

  it('parses IPv6 forms into 16 bytes', () => {
    expect(parseIPv6('::1')).toEqual([...Array(15).fill(0), 1]);
    expect(parseIPv6('1:2::3')).toEqual([0, 1, 0, 2, ...Array(10).fill(0), 0, 3]);
    expect(parseIPv6('::ffff:1.2.3.4')!.slice(10)).toEqual([0xff, 0xff, 1, 2, 3, 4]);
    expect(parseIPv6('not-an-ip')).toBeNull();
  });
});

describe('OutboundClient with private targets refused', () => {
  const guarded = new OutboundClient({ allowPrivateTargets: false });
  afterAll(() => guarded.close());

  it.each([
    ['http://127.0.0.1:8080/hook', /127\.0\.0\.1 is a loopback address/],
    ['http://localhost:8080/hook', /localhost resolves to a loopback address/],
    ['http://0x7f000001/hook', /loopback/],
    ['http://2130706433/hook', /loopback/],
    ['http://[::1]/hook', /loopback/],
    ['http://[::ffff:127.0.0.1]/hook', /loopback/],
    ['http://169.254.169.254/latest/meta-data', /cloud metadata/],
    ['http://[fd00:ec2::254]/latest', /cloud metadata/],
    ['http://10.0.0.5/', /private/],
    ['http://100.100.100.200/', /carrier-grade NAT/],
    ['ftp://example.com/file', /http or https/],
    ['file:///etc/passwd', /http or https/],
    ['https://user:pass@example.com/', /credentials/],
    ['not a url', /not a valid URL/],
  ])('refuses %s', async (url, message) => {
    await expect(guarded.assertAllowedUrl(url)).rejects.toThrow(message);
  });

  it('accepts a public address literal', async () => {
    await expect(guarded.assertAllowedUrl('https://93.184.216.34/hook')).resolves.toBeInstanceOf(URL);
  });

  it('refuses a host when any of its addresses is internal', async () => {
    const resolve: Resolver = async () => [
      { address: '93.184.216.34', family: 4 },
      { address: '10.0.0.7', family: 4 },
    ];
    const client = new OutboundClient({ allowPrivateTargets: false, resolve });
    await expect(client.assertAllowedUrl('https://mixed.example/hook')).rejects.toThrow(/mixed\.example resolves to a private address \(10\.0\.0\.7\)/);
    await client.close();
  });

  it('reports a host that does not resolve', async () => {
    const client = new OutboundClient({ allowPrivateTargets: false, resolve: async () => [] });
    await expect(client.assertAllowedUrl('https://nowhere.example/')).rejects.toThrow(/could not be resolved/);
    await client.close();
  });

  it('reports a host whose DNS never answers as unresolved, within the resolve timeout', async () => {
    const client = new OutboundClient({ allowPrivateTargets: false, resolve: () => new Promise(() => {}), resolveTimeoutMs: 50 });
    await expect(client.assertAllowedUrl('https://silent.example/')).rejects.toMatchObject({ unresolved: true, message: expect.stringMatching(/silent\.example could not be resolved \(no DNS answer within 0\.05 s\)/) });
    await client.close();
  });

  it('refuses at connect time when DNS rebinds to an internal address, and never connects', async () => {
    const receiver = await startReceiver((_req, res) => res.end('ok'));
    let calls = 0;
    // First answer public (passes the up-front check), every later answer loopback.
    const resolve: Resolver = async () => (++calls === 1 ? [{ address: '93.184.216.34', family: 4 }] : [{ address: '127.0.0.1', family: 4 }]);
    const client = new OutboundClient({ allowPrivateTargets: false, resolve });
    const attempt = client.post(`http://rebind.example:${receiver.port}/hook`, { headers: {}, body: '{}', timeoutMs: 2000 });
    await expect(attempt).rejects.toMatchObject({ kind: 'forbidden_target', message: expect.stringMatching(/rebind\.example resolves to a loopback address/) });
    expect(calls).toBe(2);
    expect(receiver.hits).toEqual([]);
    await client.close();
    await receiver.close();
  });

  it('refuses a direct post to an internal literal without sending anything', async () => {
    const receiver = await startReceiver((_req, res) => res.end('ok'));
    await expect(guarded.post(`${receiver.url}/hook`, { headers: {}, body: '{}', timeoutMs: 2000 })).rejects.toMatchObject({ kind: 'forbidden_target' });
    expect(receiver.hits).toEqual([]);
    await receiver.close();
  });
});

describe('OutboundClient requests', () => {
  it('connects to the address its resolver checked (the connection is pinned to it)', async () => {
    const receiver = await startReceiver((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`host=${req.headers.host}`);
    });
    // A name the system resolver does not know: reaching the server proves our lookup was used.
    const client = new OutboundClient({ allowPrivateTargets: true, resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    const res = await client.post(`http://receiver.invalid:${receiver.port}/x`, { headers: { 'content-type': 'application/json' }, body: '{}', timeoutMs: 2000 });
    expect(res.status).toBe(200);
    expect(res.bodyExcerpt).toBe(`host=receiver.invalid:${receiver.port}`);
    expect(receiver.hits).toEqual(['POST /x']);
    await client.close();
    await receiver.close();
  });

  it('does not follow redirects', async () => {
    const receiver = await startReceiver((req, res) => {
      if (req.url === '/start') {
        res.writeHead(302, { location: '/elsewhere' });
        res.end();
      } else res.end('followed');
    });
    const client = new OutboundClient({ allowPrivateTargets: true });
    const res = await client.post(`${receiver.url}/start`, { headers: {}, body: '{}', timeoutMs: 2000 });
    expect(res.status).toBe(302);
    expect(receiver.hits).toEqual(['POST /start']);
    await client.close();
    await receiver.close();
  });

  it('times out a slow receiver within the budget', async () => {
    let late: NodeJS.Timeout | undefined;
    const receiver = await startReceiver((_req, res) => {
      // Far past the budget, so a late timer on a loaded machine still times out first.
      late = setTimeout(() => res.end('late'), 30_000);
    });
    const client = new OutboundClient({ allowPrivateTargets: true });
    const started = Date.now();
    const error = await client.post(`${receiver.url}/slow`, { headers: {}, body: '{}', timeoutMs: 300 }).catch((e) => e);
    expect(error).toBeInstanceOf(OutboundRequestError);
    expect(error.kind).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(10_000);
    clearTimeout(late);
    await client.close();
    await receiver.close();
  });

  it('reports a refused connection as a network error', async () => {
    const receiver = await startReceiver((_req, res) => res.end());
    const url = receiver.url;
    await receiver.close();
    const client = new OutboundClient({ allowPrivateTargets: true });
    await expect(client.post(`${url}/gone`, { headers: {}, body: '{}', timeoutMs: 2000 })).rejects.toMatchObject({ kind: 'network', message: expect.stringMatching(/ECONNREFUSED/) });
    await client.close();
  });

  it('keeps only an excerpt of a large response body', async () => {
    const receiver = await startReceiver((_req, res) => {
      res.writeHead(500);
      res.end('x'.repeat(100_000));
    });
    const client = new OutboundClient({ allowPrivateTargets: true });
    const res = await client.post(`${receiver.url}/big`, { headers: {}, body: '{}', timeoutMs: 2000 });
    expect(res.status).toBe(500);
    expect(res.bodyExcerpt).toHaveLength(1024);
    await client.close();
    await receiver.close();
  });
});
