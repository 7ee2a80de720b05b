/**
 * `npm run bench:streams`: 10,000 open SSE streams on one data-plane process (they
 * must not exhaust memory; docs/quality-bars.md). Starts bench/eval-server.ts (same profile rules
 * as bench:eval), opens BENCH_STREAMS (default 10,000) anonymous streams on the demo service, and
 * reports the server's RSS and heap before and after, per stream; then makes one demo write and
 * measures how long until every stream got its `flag-update`; then closes all streams and checks
 * the server forgot them. Last, one client that resumes (a full replay) and never reads: the
 * server's memory meanwhile, and how long until it is dropped (STREAM_STALL_TIMEOUT_MS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const STREAMS = Number(process.env.BENCH_STREAMS ?? 10_000);
const PARALLEL = 500;
const STALL_MS = 5_000;

interface Memory {
  usage: NodeJS.MemoryUsage;
  streams: number;
}

function startServer(): Promise<{ child: ChildProcess; urls: { control: string; data: string } }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'eval-server.ts')], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // Every stream comes from this machine's one address, on one service: raise those caps.
    env: {
      STREAM_MAX_PER_IP: String(STREAMS),
      STREAM_MAX_PER_SERVICE: String(STREAMS),
      HTTP_MAX_CONNECTIONS: String(STREAMS + 1_000),
      STREAM_STALL_TIMEOUT_MS: String(STALL_MS),
      ...process.env,
    },
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    child.on('message', (m: { type: string; control: string; data: string }) => {
      if (m.type === 'ready') resolve({ child, urls: m });
    });
  });
}

function ask<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: { type: string }) => {
      if (m.type === type) {
        child.off('message', on);
        resolve(m as T);
      }
    };
    child.on('message', on);
    child.send({ type });
  });
}

interface Stream {
  req: http.ClientRequest;
  gotUpdate: Promise<number>;
}

const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });

function open(url: string, flagKey: string): Promise<Stream> {
  return new Promise((resolve, reject) => {
    let onUpdate: (at: number) => void = () => undefined;
    const gotUpdate = new Promise<number>((r) => {
      onUpdate = r;
    });
    const req = http.get(url, { agent, headers: { accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
      res.setEncoding('utf8');
      let connected = false;
      res.on('data', (chunk: string) => {
        if (!connected && chunk.includes('"type":"connected"')) {
          connected = true;
          resolve({ req, gotUpdate });
        }
        if (chunk.includes(`"flagKey":"${flagKey}"`)) onUpdate(performance.now());
      });
    });
    req.on('error', reject);
  });
}

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

/**
 * One client that resumes from an unknown id (so the server replays every visible flag) and
 * never reads: the server's memory while it is connected, and how long until it is dropped.
 */
async function slowReader(child: ChildProcess, dataUrl: string, serviceId: string) {
  const before = await ask<Memory>(child, 'memory');
  const { hostname, port } = new URL(dataUrl);
  const socket = net.connect(Number(port), hostname);
  socket.pause();
  socket.on('error', () => undefined);
  socket.write(`GET /api/flags/stream?serviceId=${serviceId} HTTP/1.1\r\nHost: x\r\nLast-Event-ID: gone\r\n\r\n`);
  const t0 = performance.now();
  let peak = before;
  let dropped = false;
  while (performance.now() - t0 < STALL_MS * 4) {
    await new Promise((r) => setTimeout(r, 250));
    const now = await ask<Memory>(child, 'memory');
    if (now.usage.rss > peak.usage.rss) peak = now;
    if (now.streams === 0 && performance.now() - t0 > 1_000) {
      dropped = true;
      break;
    }
  }
  socket.destroy();
  console.log(
    `one non-reading client of a full replay (all environments): server RSS peak +${mb(peak.usage.rss - before.usage.rss)}, heap+external +${mb(peak.usage.heapUsed + peak.usage.external - before.usage.heapUsed - before.usage.external)}; ` +
      (dropped ? `dropped after ${((performance.now() - t0) / 1000).toFixed(1)} s (STREAM_STALL_TIMEOUT_MS ${STALL_MS})` : 'NOT dropped'),
  );
}

async function main() {
  const { child, urls } = await startServer();
  try {
    const demo = (await (await fetch(`${urls.control}/api/demo`)).json()) as { services: { serviceId: string }[] };
    const serviceId = demo.services[0].serviceId;
    const streamUrl = `${urls.data}/api/flags/stream?serviceId=${serviceId}&environment=development`;
    await new Promise((r) => setTimeout(r, 1_000));
    const before = await ask<Memory>(child, 'memory');
    const flagKey = 'px-2024';
    const streams: Stream[] = [];
    const t0 = performance.now();
    while (streams.length < STREAMS) {
      const n = Math.min(PARALLEL, STREAMS - streams.length);
      streams.push(...(await Promise.all(Array.from({ length: n }, () => open(streamUrl, flagKey)))));
    }
    const openMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 2_000));
    const after = await ask<Memory>(child, 'memory');
    console.log(`opened ${streams.length} SSE streams in ${(openMs / 1000).toFixed(1)} s; server counts ${after.streams} open`);
    console.log(`server RSS ${mb(before.usage.rss)} -> ${mb(after.usage.rss)} (+${mb(after.usage.rss - before.usage.rss)}, ${((after.usage.rss - before.usage.rss) / streams.length / 1024).toFixed(1)} KB per stream)`);
    console.log(`server heap ${mb(before.usage.heapUsed)} -> ${mb(after.usage.heapUsed)} (+${mb(after.usage.heapUsed - before.usage.heapUsed)})`);

    const writeAt = performance.now();
    const write = await fetch(`${urls.control}/api/flags/bulk`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ flags: [{ key: flagKey, serviceId, environment: 'development', updates: { enabled: true } }] }),
    });
    if (write.status >= 300) throw new Error(`demo write failed: ${write.status} ${await write.text()}`);
    const arrivals = (await Promise.all(streams.map((s) => s.gotUpdate))).map((t) => t - writeAt).sort((a, b) => a - b);
    console.log(
      `one demo write reached all ${arrivals.length} streams: p50 ${arrivals[Math.floor(arrivals.length / 2)].toFixed(0)} ms, p99 ${arrivals[Math.floor(arrivals.length * 0.99)].toFixed(0)} ms, last ${arrivals[arrivals.length - 1].toFixed(0)} ms after the write`,
    );
    for (const s of streams) s.req.destroy();
    const deadline = Date.now() + 20_000;
    let left = after.streams;
    while (left > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      left = (await ask<Memory>(child, 'memory')).streams;
    }
    console.log(`after closing: server counts ${left} open streams`);
    await slowReader(child, urls.data, serviceId);
  } finally {
    child.send({ type: 'stop' });
    await new Promise((r) => child.once('exit', r));
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
