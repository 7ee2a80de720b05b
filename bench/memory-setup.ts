/**
 * What `npm run bench:memory` does through the public API of the control plane (account,
 * project, services, flags, a project token) and checks on the data plane (evaluations,
 * /api/health/evaluation). Plain HTTP, as any client would.
 */

export interface Session {
  api: string;
  cookie: string;
  csrf: string;
}

export interface CallOptions {
  body?: unknown;
  session?: Session;
  token?: string;
}

export async function call<T = any>(method: string, url: string, opts: CallOptions = {}): Promise<{ status: number; body: T; headers: Headers }> {
  const headers: Record<string, string> = {};
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.session) {
    headers.cookie = opts.session.cookie;
    headers['x-csrf-token'] = opts.session.csrf;
  }
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(url, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text.slice(0, 500)}`);
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T, headers: res.headers };
}

/** A new account (its session cookie and CSRF token) on the control plane. */
export async function signUp(api: string, email = `bench-memory-${process.pid}-${Date.now()}@example.com`): Promise<Session> {
  const signup = await call('POST', `${api}/api/auth/signup`, {
    body: { email, password: 'a long benchmark password', name: 'Memory bench' },
  });
  const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
  if (!cookie) throw new Error('signup set no session cookie');
  const csrf = (await call<{ token: string }>('GET', `${api}/api/csrf-token`, { session: { api, cookie, csrf: '' } })).body.token;
  return { api, cookie, csrf };
}

export async function createProject(s: Session, name: string): Promise<string> {
  return (await call<{ id: string }>('POST', `${s.api}/api/projects`, { session: s, body: { name } })).body.id;
}

export async function createService(s: Session, projectId: string, name: string): Promise<string> {
  return (await call<{ id: string }>('POST', `${s.api}/api/services`, { session: s, body: { projectId, name } })).body.id;
}

/** A project token with `read`; with `scope`, bound to one service and environment (what flagd selectors need, docs/local-evaluation.md#credentials). */
export async function createReadToken(s: Session, projectId: string, scope?: { serviceId: string; environment: string }): Promise<string> {
  return (await call<{ value: string }>('POST', `${s.api}/api/projects/${projectId}/tokens`, { session: s, body: { name: 'bench-memory', permissions: { read: true }, scope } })).body.value;
}

const PLANS = ['free', 'starter', 'pro', 'enterprise'];
const COUNTRIES = ['US', 'CA', 'GB', 'DE', 'FR', 'NL', 'SE', 'JP', 'AU', 'BR'];

/**
 * Flag number i of a service: a realistic mix rather than 10,000 bare booleans. About half are
 * boolean flags, the rest string (3 weighted variants), number and object flags; every second
 * flag has targeting (1-3 rules over plan, country, email domain, app version, some with a
 * percentage rollout), every flag a name, a description and two tags.
 */
export function makeFlag(i: number, serviceId: string, environment: string, prefix: string): Record<string, unknown> {
  const kind = i % 20 < 10 ? 'boolean' : i % 20 < 14 ? 'string' : i % 20 < 17 ? 'number' : 'object';
  const key = `${prefix}-${kind}-${i}`;
  const flag: Record<string, unknown> = {
    key,
    serviceId,
    environment,
    name: `${prefix} ${kind} flag ${i}`,
    description: `Benchmark flag ${i}: gates the ${kind} behaviour of feature area ${i % 97} for the ${PLANS[i % PLANS.length]} plan.`,
    type: kind,
    enabled: i % 3 !== 0,
    tags: [`team-${i % 12}`, `area-${i % 97}`],
  };
  const value = (n: number): unknown =>
    kind === 'boolean' ? n % 2 === 0 : kind === 'string' ? `variant-${n}` : kind === 'number' ? n * 10 : { layout: `grid-${n}`, limit: n * 5, beta: n % 2 === 0 };
  flag.defaultValue = value(0);
  if (kind === 'string') {
    flag.variants = [
      { name: 'control', value: 'variant-0', weight: 50 },
      { name: 'treatment-a', value: 'variant-1', weight: 30 },
      { name: 'treatment-b', value: 'variant-2', weight: 20 },
    ];
  }
  if (i % 2 === 0) {
    const rules: Record<string, unknown>[] = [
      { id: `plan-${i}`, conditions: [{ property: 'plan', operator: 'in', value: PLANS.slice(i % 3, (i % 3) + 2) }], value: value(1) },
    ];
    if (i % 4 === 0) {
      rules.push({
        id: `country-${i}`,
        conditions: [
          { property: 'country', operator: 'in', value: COUNTRIES.slice(i % 5, (i % 5) + 3) },
          { property: 'email', operator: 'ends_with', value: '@example.com' },
        ],
        value: value(2),
        rolloutPercentage: 25 + (i % 50),
      });
    }
    if (i % 8 === 0) rules.push({ id: `version-${i}`, conditions: [{ property: 'appVersion', operator: 'gte', value: 400 + (i % 20) }], value: value(3) });
    flag.targeting = rules;
  }
  return flag;
}

/** Creates flags [from, to) through POST /api/flags/bulk, 100 per request, `parallel` requests at a time. */
export async function bulkCreate(
  s: Session,
  serviceId: string,
  environment: string,
  prefix: string,
  from: number,
  to: number,
  parallel: number,
): Promise<{ created: number; requests: number }> {
  const batches: number[][] = [];
  for (let start = from; start < to; start += 100) batches.push([start, Math.min(to, start + 100)]);
  let created = 0;
  let next = 0;
  const worker = async () => {
    while (next < batches.length) {
      const [a, b] = batches[next++];
      const flags = Array.from({ length: b - a }, (_, k) => makeFlag(a + k, serviceId, environment, prefix));
      const res = await call<{ succeeded: number; failed: number }>('POST', `${s.api}/api/flags/bulk?summary=true`, { session: s, body: { flags } });
      if (res.body.failed > 0) throw new Error(`bulk create ${a}-${b}: ${res.body.failed} items failed`);
      created += res.body.succeeded;
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return { created, requests: batches.length };
}

export interface EvaluationAnswer {
  flagKey: string;
  value: unknown;
  reason: string;
  errorCode?: string;
}

export async function evaluate(data: string, token: string, serviceId: string, flagKey: string, environment = 'production'): Promise<EvaluationAnswer> {
  return (
    await call<EvaluationAnswer>('POST', `${data}/api/flags/evaluate`, {
      token,
      body: { flagKey, serviceId, environment, context: { targetingKey: 'user-4242', plan: 'pro', country: 'DE', email: 'a@example.com', appVersion: 410 } },
    })
  ).body;
}

export interface EvaluationHealth {
  snapshots: { services: number; flags: number; ready: boolean; eventsApplied?: number; eventsIgnored?: number };
  evaluationEvents: { written?: number; dropped?: number; healthy?: boolean; [k: string]: unknown };
}

/** Needs an instance administrator's session (ADMIN_EMAILS). */
export async function evaluationHealth(base: string, admin: Session): Promise<EvaluationHealth> {
  const res = await fetch(`${base}/api/health/evaluation`, { headers: { cookie: admin.cookie } });
  const body = (await res.json()) as { checks?: EvaluationHealth } & Partial<EvaluationHealth>;
  return (body.checks ?? body) as EvaluationHealth;
}

export interface LightUse {
  requests: number;
  byKind: Record<string, number>;
}

/**
 * A few minutes of light, mixed use of one embedded process, about `perSecond` requests a second
 * until `ms` have passed: evaluations (most of them) and outcome events on the data listener, and
 * on the control plane flag toggles (each one through the outbox, the bus,
 * the snapshots, webhooks and guardrail consumers), flag lists and a flag's metrics (ClickHouse).
 */
export async function lightUse(
  data: string,
  s: Session,
  token: string,
  ref: { projectId: string; serviceId: string },
  flagKeys: string[],
  ms: number,
  perSecond = 10,
): Promise<LightUse> {
  const byKind: Record<string, number> = {};
  const { serviceId } = ref;
  const query = `serviceId=${serviceId}&environment=production`;
  const end = Date.now() + ms;
  for (let n = 0; Date.now() < end; n++) {
    const key = flagKeys[n % flagKeys.length];
    const kind = n % 50 === 0 ? 'metrics' : n % 20 === 0 ? 'list' : n % 10 === 0 ? 'toggle' : n % 5 === 0 ? 'track' : 'evaluate';
    if (kind === 'evaluate') await evaluate(data, token, serviceId, key);
    else if (kind === 'track') await call('POST', `${data}/api/analytics/track`, { token, body: { serviceId, environment: 'production', events: [{ event: 'checkout', targetingKey: `user-${n % 97}`, value: n % 7 }] } });
    else if (kind === 'toggle') await call('POST', `${s.api}/api/flags/${key}/toggle?${query}`, { session: s });
    else if (kind === 'list') await call('GET', `${s.api}/api/flags?projectId=${ref.projectId}&${query}`, { session: s });
    else await call('GET', `${s.api}/api/flags/${key}/metrics?${query}`, { session: s });
    byKind[kind] = (byKind[kind] ?? 0) + 1;
    await new Promise((r) => setTimeout(r, 1000 / perSecond));
  }
  return { requests: Object.values(byKind).reduce((a, b) => a + b, 0), byKind };
}
