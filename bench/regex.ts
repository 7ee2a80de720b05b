/**
 * `npm run bench:regex`: the worst evaluation request we can build against the per-request work
 * budget (engine/budget.ts), its server time next to the same request on flags without rules,
 * measured in the same run, and the 50 ms bar of docs/quality-bars.md.
 *
 * The attack service holds ATTACK_FLAGS flags written through bulk create (25.6 MB bodies, so
 * no 256 KB single-write limit), each with 20 `matches` conditions (the per-flag cap) and as
 * much other work as the condition budget lets one flag hold. Every rule first passes 49
 * conditions, then runs its last one:
 *   - rules d0...: 49 date comparisons (each parses the attribute), then `contains` on a
 *     2,000-element array (one pass over it);
 *   - rules m0-m19: a pattern the write-time checker accepts but that backtracks quadratically
 *     on the context's 1,024-character attributes (`.*foo.*` on "aaa...", `([^b]\s{2,}\S)+` on
 *     spaces, which the estimate takes for linear).
 * The context is as large as the 64 KB body allows to make this worse. The baseline service has
 * as many flags with no rules. Requests, each with the same context:
 *   - OFREP bulk        every visible flag (all ATTACK_FLAGS);
 *   - REST batch        100 keys (the non-demo cap);
 *   - Connect ResolveAll 100 keys (the ResolveAll cap) over Connect JSON.
 * Server time is the whole time in the server (headers parsed -> answer written, from the
 * http.server diagnostics channels of bench/eval-server.ts): body, auth, evaluation, JSON.
 * The bar is held against the median of the attack rows; the maximum is printed next to the
 * baseline's, whose own maximum shows what the machine added (other processes, GC).
 * EVAL_BUDGET_CONDITIONS and EVAL_BUDGET_REGEX_MS from the environment or their defaults.
 *
 * Backends: DATABASE_URL / REDIS_URL / TEMPORAL_ADDRESS when set (after `source
 * scripts/test-infra.sh up`), the embedded profile otherwise. BENCH_REQUESTS (default 20) per
 * variant, ATTACK_FLAGS (default 100: the budget runs out within the first few).
 */
import type { ChildProcess } from 'node:child_process';
import { parseConfig } from '../api/config';
import { ask, call, signUp, startEvalServer, stopServer, type ServerUrls } from './server-process';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20);
const ATTACK_FLAGS = Number(process.env.ATTACK_FLAGS ?? 100);
/** Flags per bulk create: each attack flag is about 400 KB of JSON, bulk bodies at most 25.6 MB. */
const CHUNK = 25;
const BAR_MS = 50;
/** What the server will run with (bench/eval-server.ts reads the same environment). */
const { EVAL_BUDGET_CONDITIONS, EVAL_BUDGET_REGEX_MS } = parseConfig(process.env);

const PATTERNS: [property: string, pattern: string][] = [
  ['ua', '.*foo.*'],
  ['sp', '([^b]\\s{2,}\\S)+'],
];

/**
 * As many date rules as the condition budget lets one flag hold (a flag over it would be
 * refused before doing any work), then 20 pattern rules.
 */
function attackTargeting() {
  const cheap = Array.from({ length: 49 }, () => ({ property: 'ua', operator: 'exists' }));
  const dates = Array.from({ length: 49 }, () => ({ property: 'when', operator: 'after', value: '2000-01-01' }));
  const patternRules = Array.from({ length: 20 }, (_, i) => {
    const [property, pattern] = PATTERNS[i % PATTERNS.length];
    return { id: `m${i}`, conditions: [...cheap, { property, operator: 'matches', value: pattern }], value: true };
  });
  // 49 date comparisons (41 units each) and a contains over 2,000 elements (1 + 125): 2,136 units
  // a rule; the pattern rules and the flag itself take 1,001.
  const dateRuleCount = Math.min(180, Math.floor((EVAL_BUDGET_CONDITIONS - 1001) / 2136));
  const dateRules = Array.from({ length: dateRuleCount }, (_, i) => ({ id: `d${i}`, conditions: [...dates, { property: 'tags', operator: 'contains', value: 'absent' }], value: true }));
  // Dates first: the pattern allowance runs out within the pattern rules, after the dates' work.
  return [...dateRules, ...patternRules];
}

const CONTEXT = {
  targetingKey: 'attacker',
  when: '2024-05-01T12:00:00.123456789+02:00',
  ua: 'a'.repeat(1024),
  sp: ' '.repeat(1024),
  tags: Array.from({ length: 2000 }, (_, i) => `t${i}`),
};

/** A project with an attack and a baseline service of ATTACK_FLAGS flags each, and a read token. */
async function setUp(urls: ServerUrls) {
  const api = urls.control;
  const as = await signUp(api);
  const project = (await call('POST', `${api}/api/projects`, { ...as, body: { name: 'Bench regex' } })).body;
  const service = async (name: string) => (await call('POST', `${api}/api/services`, { ...as, body: { projectId: project.id, name } })).body.id as string;
  const attack = await service('attack');
  const baseline = await service('baseline');
  const targeting = attackTargeting();
  const keys = Array.from({ length: ATTACK_FLAGS }, (_, i) => `f-${i}`);
  for (let start = 0; start < keys.length; start += CHUNK) {
    const chunk = keys.slice(start, start + CHUNK);
    const common = { environment: 'production', type: 'boolean', enabled: true, defaultValue: false };
    const made = (await call('POST', `${api}/api/flags/bulk`, { ...as, body: { flags: chunk.map((key) => ({ key, serviceId: attack, ...common, targeting })) } })).body;
    const plain = (await call('POST', `${api}/api/flags/bulk`, { ...as, body: { flags: chunk.map((key) => ({ key, serviceId: baseline, ...common })) } })).body;
    if (made.failed || plain.failed) throw new Error(`bulk create failed: ${JSON.stringify(made.results?.find((r: { status: string }) => r.status !== 'success'))}`);
  }
  const token = (await call('POST', `${api}/api/projects/${project.id}/tokens`, { ...as, body: { name: 'bench', permissions: { read: true } } })).body.value as string;
  return { attack, baseline, keys, token };
}

interface Variant {
  name: string;
  path: string;
  headers: Record<string, string>;
  body: (serviceId: string) => string;
  /** Results of the answer that are ERROR (work budget exhausted or other). */
  errors: (answer: unknown) => number;
}

function variants(keys: string[], token: string): Variant[] {
  const json = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  const hundred = keys.slice(0, 100);
  return [
    {
      name: `OFREP bulk (${keys.length} flags)`,
      path: '/api/ofrep/v1/evaluate/flags',
      headers: json,
      body: () => JSON.stringify({ context: CONTEXT }),
      errors: (a) => (a as { flags: { errorCode?: string }[] }).flags.filter((f) => f.errorCode !== undefined).length,
    },
    {
      name: 'REST batch (100 keys)',
      path: '/api/flags/evaluate/batch',
      headers: json,
      body: (serviceId) => JSON.stringify({ serviceId, environment: 'production', context: CONTEXT, flags: hundred.map((flagKey) => ({ flagKey })) }),
      errors: (a) => (a as { results: { reason: string }[] }).results.filter((r) => r.reason === 'ERROR').length,
    },
    {
      name: 'Connect ResolveAll (100 keys)',
      path: '/api/connect/flags.v1.EvaluationService/ResolveAll',
      headers: { ...json, 'connect-protocol-version': '1' },
      body: (serviceId) => JSON.stringify({ serviceId, environment: 'production', context: CONTEXT, flagKeys: hundred }),
      errors: (a) => Object.values((a as { flags: Record<string, { reason?: string }> }).flags).filter((f) => f.reason === 'ERROR').length,
    },
  ];
}

/** Sequential requests; the server's own time for each, and the ERROR count of the last answer. */
async function measure(child: ChildProcess, url: string, v: Variant, serviceId: string) {
  // OFREP names the service in headers, the others in the body.
  const headers = { ...v.headers, 'x-service-id': serviceId, 'x-environment': 'production' };
  const body = v.body(serviceId);
  for (let i = 0; i < 3; i++) await (await fetch(url, { method: 'POST', headers, body })).text();
  await ask(child, { type: 'server-times-start' }, 'server-times-started');
  let errors = 0;
  for (let i = 0; i < REQUESTS; i++) {
    const res = await fetch(url, { method: 'POST', headers, body });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${v.name}: ${res.status} ${text.slice(0, 300)}`);
    errors = v.errors(JSON.parse(text));
  }
  const times = (await ask<{ times: number[] }>(child, { type: 'server-times' }, 'server-times')).times.sort((a, b) => a - b);
  return { p50: times[Math.floor(times.length / 2)], max: times[times.length - 1], errors, bytes: body.length };
}

async function main() {
  const { child, urls } = await startEvalServer({ env: { BENCH_DEMO_SEED: 'false', BENCH_EVENTS: 'off' } });
  let failed = false;
  try {
    const { attack, baseline, keys, token } = await setUp(urls);
    // Snapshots follow the bus: wait until the attack service's last flag evaluates.
    const last = keys[keys.length - 1];
    for (const deadline = Date.now() + 60_000; ; ) {
      const res = await fetch(`${urls.data}/api/flags/evaluate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ flagKey: last, serviceId: attack, environment: 'production', context: {} }),
      });
      const answer = (await res.json()) as { errorCode?: string };
      if (answer.errorCode !== 'FLAG_NOT_FOUND') break;
      if (Date.now() > deadline) throw new Error('attack flags never reached the data plane');
      await new Promise((r) => setTimeout(r, 200));
    }
    const rules = attackTargeting().length;
    console.log(`bench:regex: ${ATTACK_FLAGS} flags of ${rules} rules x 50 conditions (20 matches each); context of ${JSON.stringify(CONTEXT).length} bytes`);
    console.log(`budget: EVAL_BUDGET_CONDITIONS=${EVAL_BUDGET_CONDITIONS} EVAL_BUDGET_REGEX_MS=${EVAL_BUDGET_REGEX_MS}; ${REQUESTS} sequential requests per row`);
    console.log('');
    console.log(`${'request'.padEnd(32)} ${'baseline p50/max ms'.padStart(20)} ${'attack p50/max ms'.padStart(19)} ${'ERROR results'.padStart(14)}  bar ${BAR_MS} ms (median)`);
    for (const v of variants(keys, token)) {
      const url = `${urls.data}${v.path}`;
      const base = await measure(child, url, v, baseline);
      const worst = await measure(child, url, v, attack);
      const over = worst.p50 >= BAR_MS;
      failed ||= over;
      console.log(
        `${v.name.padEnd(32)} ${`${base.p50.toFixed(1)} / ${base.max.toFixed(1)}`.padStart(20)} ${`${worst.p50.toFixed(1)} / ${worst.max.toFixed(1)}`.padStart(19)} ${String(worst.errors).padStart(14)}  ${over ? 'OVER' : 'under'}`,
      );
    }
  } finally {
    await stopServer(child);
  }
  if (failed) {
    console.log(`\nthe worst request took ${BAR_MS} ms or more of server time (median)`);
    process.exitCode = 1;
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
