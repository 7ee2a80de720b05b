/**
 * A constant-rate (open-loop) load generator for latency at a fixed offered load.
 *
 * Why not autocannon -R: autocannon's rate limit lets each connection run closed-loop until it
 * has sent its share for the current second and then pause until the next one, so "half of
 * peak" is really full load for half of every second, and its coordinated-omission correction
 * assumes a 1 ms expected interval whatever the rate. The p99 it prints at half load is the
 * closed-loop p99 plus synthetic samples.
 *
 * Here request i is due at start + i / rate, whether or not earlier ones have answered, and its
 * latency is measured from that due time (not from when a connection became free): a stall in
 * the server shows up in every request that should have been sent during it, which is the
 * coordinated-omission correction done the way wrk2 does it. Requests go over a keep-alive
 * undici Pool; when every connection is busy they wait in the pool's queue, and that wait counts.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

export interface OpenLoopOptions {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  /** Requests per second offered. */
  rate: number;
  durationMs: number;
  connections: number;
  /** Offered load before measuring starts (connections open, JIT warm); not recorded. */
  warmupMs?: number;
}

export interface OpenLoopResult {
  rate: number;
  sent: number;
  /** 2xx answers (only these are in the percentiles). */
  ok: number;
  /** Non-2xx answers and transport errors. */
  failed: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export async function openLoop(opts: OpenLoopOptions): Promise<OpenLoopResult> {
  const url = new URL(opts.url);
  const pool = new Pool(url.origin, { connections: opts.connections, pipelining: 1, keepAliveTimeout: 30_000 });
  try {
    if (opts.warmupMs) await offer(pool, url, opts, opts.warmupMs, null);
    const latencies: number[] = [];
    const counts = await offer(pool, url, opts, opts.durationMs, latencies);
    latencies.sort((a, b) => a - b);
    const at = (q: number) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] : NaN);
    return { rate: opts.rate, ...counts, p50: at(0.5), p90: at(0.9), p99: at(0.99), p999: at(0.999), max: latencies[latencies.length - 1] ?? NaN };
  } finally {
    await pool.close();
  }
}

/** Sends rate x duration requests on schedule; resolves when every one has answered or failed. */
function offer(pool: Pool, url: URL, opts: OpenLoopOptions, durationMs: number, latencies: number[] | null) {
  const total = Math.max(1, Math.floor((opts.rate * durationMs) / 1000));
  const interval = 1000 / opts.rate;
  const path = url.pathname + url.search;
  let issued = 0;
  let settled = 0;
  let ok = 0;
  let failed = 0;
  return new Promise<{ sent: number; ok: number; failed: number }>((resolve) => {
    const start = performance.now();
    const finish = () => {
      if (++settled === total) resolve({ sent: total, ok, failed });
    };
    const send = (due: number) => {
      pool.request({ path, method: opts.method, headers: opts.headers, body: opts.body }).then(
        async (res) => {
          await res.body.dump();
          if (res.statusCode >= 200 && res.statusCode < 300) {
            ok++;
            latencies?.push(performance.now() - due);
          } else failed++;
          finish();
        },
        () => {
          failed++;
          finish();
        },
      );
    };
    // Spin on setImmediate (the generator has its own core): every turn sends what has come due.
    const tick = () => {
      const dueNow = Math.min(total, Math.floor((performance.now() - start) / interval) + 1);
      while (issued < dueNow) send(start + issued++ * interval);
      if (issued < total) setImmediate(tick);
    };
    tick();
  });
}
