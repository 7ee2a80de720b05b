import { request } from 'undici';
import type { GuardResult, PrometheusGuard } from '../../domain/guards';

/**
 * Prometheus guards (docs/canary.md#prometheus-guards): each guard's query, templated for the
 * flag and window at hand, is sent to its server's instant-query endpoint and its one value
 * compared with the guard's threshold. Anything that cannot be judged (no series, several, an
 * error, a timeout, an oversized or malformed answer) is `wait`, never `pass`.
 *
 * Only servers on the allow-list are called (PROMETHEUS_URL_ALLOWLIST): guard URLs are set by
 * whoever may edit a canary or the project's guardrail, and a server usually lives on an internal
 * network, so the operator names the ones that may be reached.
 */

/** What a guard's query is rendered with at one gate. */
export interface GuardContext {
  flagKey: string;
  environment: string;
  serviceId: string;
  /** Start of the judged window (a canary's stage start, the guardrail's change). */
  startMs: number;
  /** End of the judged window. */
  endMs: number;
}

export interface PrometheusGuardsOptions {
  /** Origins (scheme, host and port) guards may call; empty: no guard may be set. */
  allowedOrigins: string[];
  timeoutMs?: number;
  maxResponseBytes?: number;
}

const DEFAULT_TIMEOUT_MS = 5_000;
const DEFAULT_MAX_RESPONSE_BYTES = 1_048_576;
const MAX_REASON_DETAIL = 300;

/** A value placed inside a PromQL double-quoted string: escaped so it cannot end the string. */
export function promqlStringValue(value: string): string {
  return value.replace(/[\\"\n\r\t]/g, (c) => ({ '\\': '\\\\', '"': '\\"', '\n': '\\n', '\r': '\\r', '\t': '\\t' })[c]!);
}

/** The query with its placeholders filled (docs/canary.md#templating). Unknown placeholders are left as written. */
export function renderGuardQuery(query: string, context: GuardContext): string {
  const values: Record<string, string> = {
    flagKey: promqlStringValue(context.flagKey),
    environment: promqlStringValue(context.environment),
    serviceId: promqlStringValue(context.serviceId),
    stageStart: String(Math.floor(context.startMs / 1000)),
    window: `${Math.max(1, Math.round((context.endMs - context.startMs) / 1000))}s`,
  };
  return query.replace(/\{\{(\w+)\}\}/g, (whole, name: string) => values[name] ?? whole);
}

/** Prometheus writes special floats as strings of its own. */
function parseSampleValue(text: unknown): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return typeof text === 'string' ? Number(text) : NaN;
}

const clip = (text: string) => (text.length > MAX_REASON_DETAIL ? `${text.slice(0, MAX_REASON_DETAIL)}…` : text);

export class PrometheusGuards {
  private readonly allowedOrigins: Set<string>;
  private readonly timeoutMs: number;
  private readonly maxResponseBytes: number;

  constructor(options: PrometheusGuardsOptions) {
    this.allowedOrigins = new Set(options.allowedOrigins.map((o) => new URL(o).origin));
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  }

  /** Why a guard's URL may not be called, or null. */
  refusal(url: string): string | null {
    const origin = new URL(url).origin;
    if (this.allowedOrigins.has(origin)) return null;
    if (!this.allowedOrigins.size) return 'no Prometheus server may be called: the operator has set no PROMETHEUS_URL_ALLOWLIST';
    return `${origin} is not in PROMETHEUS_URL_ALLOWLIST`;
  }

  /** Problems with the guards of a write, as validation problems under `path`. */
  problems(guards: PrometheusGuard[], path: string): { path: string; message: string }[] {
    return guards.flatMap((g, i) => {
      const refusal = this.refusal(g.url);
      return refusal ? [{ path: `${path}.${i}.url`, message: refusal }] : [];
    });
  }

  /** Every guard, at once. */
  check(guards: PrometheusGuard[], context: GuardContext): Promise<GuardResult[]> {
    return Promise.all(guards.map((g) => this.checkOne(g, context)));
  }

  private async checkOne(guard: PrometheusGuard, context: GuardContext): Promise<GuardResult> {
    const wait = (reason: string, value: number | null = null): GuardResult => ({ name: guard.name, decision: 'wait', reason, value });
    // Checked again at the gate: the allow-list may have shrunk since the guard was written.
    const refusal = this.refusal(guard.url);
    if (refusal) return wait(refusal);
    const answer = await this.query(guard.url, renderGuardQuery(guard.query, context));
    if ('problem' in answer) return wait(answer.problem);
    const value = answer.value;
    if (Number.isNaN(value)) return wait('the query answered NaN');
    const breached = guard.failWhen.op === '>' ? value > guard.failWhen.threshold : value < guard.failWhen.threshold;
    const comparison = `${value} ${breached ? '' : 'not '}${guard.failWhen.op} ${guard.failWhen.threshold}`;
    return { name: guard.name, decision: breached ? 'fail' : 'pass', reason: comparison, value };
  }

  /** The instant query's single value, or why there is none. */
  private async query(baseUrl: string, promql: string): Promise<{ value: number } | { problem: string }> {
    const url = new URL(`${baseUrl.replace(/\/+$/, '')}/api/v1/query`);
    url.searchParams.set('query', promql);
    let status: number;
    let text: string;
    try {
      const res = await request(url, {
        method: 'GET',
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(this.timeoutMs),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      status = res.statusCode;
      const body = await readBounded(res.body, this.maxResponseBytes);
      if (body === null) return { problem: `the answer is larger than ${this.maxResponseBytes} bytes` };
      text = body;
    } catch (error) {
      const name = (error as { name?: string }).name;
      if (name === 'TimeoutError' || name === 'AbortError' || /timeout/i.test(String((error as { code?: string }).code))) return { problem: `no answer within ${this.timeoutMs / 1000} s` };
      return { problem: `the server could not be reached (${clip((error as { code?: string }).code ?? String(error))})` };
    }
    let parsed: { status?: string; errorType?: string; error?: string; data?: { resultType?: string; result?: unknown } };
    try {
      parsed = JSON.parse(text);
    } catch {
      return { problem: `not a Prometheus answer (HTTP ${status})` };
    }
    if (parsed.status !== 'success') return { problem: `query error (HTTP ${status}): ${clip(`${parsed.errorType ?? 'error'}: ${parsed.error ?? 'no message'}`)}` };
    const { resultType, result } = parsed.data ?? {};
    if (resultType === 'scalar' && Array.isArray(result)) return { value: parseSampleValue(result[1]) };
    if (resultType !== 'vector' || !Array.isArray(result)) return { problem: `a ${resultType ?? 'missing'} result cannot be judged: the query must answer one number` };
    if (result.length === 0) return { problem: 'no data: the query answered no series' };
    if (result.length > 1) return { problem: `the query answered ${result.length} series; it must answer one (aggregate it, e.g. with sum or max)` };
    const sample = (result[0] as { value?: unknown[] }).value;
    return Array.isArray(sample) ? { value: parseSampleValue(sample[1]) } : { problem: 'a series without a value' };
  }
}

/** The body as text, or null past `limit` bytes (the rest is not read). */
async function readBounded(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A gate with its guards' answers: a breached guard fails it; otherwise a guard that could not be
 * judged makes it wait, since it must never pass unseen.
 */
export function withGuards<G extends { decision: 'pass' | 'fail' | 'wait'; reason: string }>(gate: G, guards: GuardResult[]): G & { guards?: GuardResult[] } {
  if (!guards.length) return gate;
  const describe = (g: GuardResult) => `guard "${g.name}" ${g.decision === 'fail' ? 'breached' : 'cannot be judged'}: ${g.reason}`;
  const failed = guards.filter((g) => g.decision === 'fail');
  const waiting = guards.filter((g) => g.decision === 'wait');
  if (failed.length) {
    const reasons = failed.map(describe);
    return { ...gate, decision: 'fail', reason: (gate.decision === 'fail' ? [gate.reason, ...reasons] : reasons).join('; '), guards };
  }
  if (gate.decision !== 'fail' && waiting.length) {
    const reasons = waiting.map(describe);
    return { ...gate, decision: 'wait', reason: (gate.decision === 'wait' ? [gate.reason, ...reasons] : reasons).join('; '), guards };
  }
  return { ...gate, guards };
}
