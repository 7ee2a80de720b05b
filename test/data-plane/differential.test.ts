import { randomBytes } from 'node:crypto';
import { fromJson, toJson, type JsonValue } from '@bufbuild/protobuf';
import { ValueSchema } from '@bufbuild/protobuf/wkt';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { compileFlag, evaluate, type EvaluationResult, type FlagDefinition, type FlagType } from '../../api/features/evaluation/engine/index';
import { EvaluationService } from '../../api/gen/flags/v1/evaluation_pb';
import cases from '../evaluation/cases.json';
import { startTestApp, type TestApp } from '../support/harness';
import { singleProblems } from '../support/ofrep-schema';
import { createFixture, type DataPlaneFixture } from './support';

/**
 * Every case of test/evaluation/cases.json through REST, OFREP, Connect and gRPC-Web: each
 * protocol must agree with the engine (value, reason, variant, error code), as each protocol
 * expresses them. Stored flags are written straight into Postgres, because many cases hold
 * data the write API refuses (bad regexes, odd weights, values of the wrong type) and the
 * engine must cope with it; the services are new, so the snapshots load them on first use.
 */

interface Case {
  name: string;
  flag: (FlagDefinition & { type: string }) | null;
  flagKey: string;
  context: unknown;
  defaultValue: unknown;
  expectedType?: FlagType;
  expected: { value: unknown; reason: string; variant?: string; errorCode?: string };
}

const ALL = cases as unknown as Case[];
const STORABLE_TYPES = new Set(['boolean', 'string', 'number', 'object']);
/** Postgres refuses a flag type outside the four (CHECK constraint), so such stored data cannot exist. */
const storable = ALL.filter((c) => c.flag === null || STORABLE_TYPES.has(c.flag.type));
const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

let app: TestApp;
let fx: DataPlaneFixture;
/** The service each case's flag lives in (keys repeat across cases with different definitions). */
const serviceOf = new Map<Case, string>();

beforeAll(async () => {
  // About 2,000 requests from one IP and token: raise the limits (they are tested elsewhere).
  app = await startTestApp({ RATE_LIMIT_PER_IP: '1000000', RATE_LIMIT_PER_TOKEN: '1000000', RATE_LIMIT_PER_SERVICE: '1000000' });
  fx = await createFixture(app);
  const services: { id: string; defs: Map<string, string> }[] = [];
  const sql = app.platform.db.sql;
  for (const c of storable) {
    const def = c.flag ? JSON.stringify(c.flag) : null;
    let service = services.find((s) => (def === null ? !s.defs.has(c.flagKey) : !s.defs.has(c.flagKey) || s.defs.get(c.flagKey) === def));
    if (!service) {
      const res = await fx.owner.request('POST', '/api/services', { projectId: fx.projectId, name: `diff-${services.length}-${randomBytes(2).toString('hex')}` });
      if (res.status !== 201) throw new Error(res.text);
      service = { id: res.body.id, defs: new Map() };
      services.push(service);
    }
    if (def !== null && !service.defs.has(c.flagKey)) {
      const f = c.flag!;
      const jsonb = (v: unknown) => (v === null || v === undefined ? sql`'null'::jsonb` : sql`${sql.json(v as never)}`);
      await sql`
        INSERT INTO flags (id, project_id, service_id, environment, key, name, type, enabled, default_value, variants, targeting, is_public)
        VALUES (${`flg_diff_${randomBytes(8).toString('hex')}`}, ${fx.projectId}, ${service.id}, 'development', ${f.key}, ${f.key}, ${f.type},
                ${f.enabled === true}, ${jsonb(f.defaultValue)}, ${jsonb(f.variants ?? [])}, ${jsonb(f.targeting ?? [])}, false)`;
    }
    // A missing-flag case must not find a flag of the same key in its service.
    service.defs.set(c.flagKey, def ?? service.defs.get(c.flagKey) ?? '');
    serviceOf.set(c, service.id);
  }
});
afterAll(() => app?.stop());

function engine(c: Case, expectedType?: FlagType): EvaluationResult {
  return evaluate(c.flag ? compileFlag(c.flag) : undefined, c.flagKey, c.context as never, c.defaultValue, expectedType ? { expectedType } : undefined);
}

it('the case file is the one the engine is tested with, and the engine agrees with it', () => {
  expect(storable.length).toBeGreaterThan(400);
  for (const c of ALL) {
    const r = engine(c, c.expectedType);
    expect({ name: c.name, value: r.value, reason: r.reason, variant: r.variant, errorCode: r.errorCode }).toEqual({
      name: c.name,
      value: c.expected.value,
      reason: c.expected.reason,
      variant: c.expected.variant,
      errorCode: c.expected.errorCode,
    });
  }
});

it('REST agrees with the engine on every storable case', async () => {
  const mismatches: string[] = [];
  for (const c of storable) {
    const r = engine(c);
    const res = await app.request('POST', '/api/flags/evaluate', {
      listener: 'data',
      token: fx.readToken,
      body: { flagKey: c.flagKey, serviceId: serviceOf.get(c), environment: 'development', defaultValue: c.defaultValue, context: c.context },
    });
    const want: Record<string, unknown> = { flagKey: c.flagKey, value: r.value === undefined ? null : r.value, reason: r.reason };
    if (r.variant !== undefined) want.variant = r.variant;
    if (r.errorCode !== undefined) {
      want.errorCode = r.errorCode;
      want.errorMessage = r.errorMessage;
    }
    if (res.status !== 200 || JSON.stringify(res.body) !== JSON.stringify(want)) mismatches.push(`${c.name}: ${res.status} ${res.text} != ${JSON.stringify(want)}`);
  }
  expect(mismatches).toEqual([]);
});

/** How OFREP words the engine's reasons and error codes (the published schema's enums). */
const OFREP_REASON: Record<string, string> = { DEFAULT: 'STATIC', VARIANT: 'SPLIT', TARGETING_MATCH: 'TARGETING_MATCH' };
const OFREP_ERROR: Record<string, string> = { TYPE_MISMATCH: 'GENERAL' };

it('OFREP agrees with the engine on every storable case, in the published schema', async () => {
  const mismatches: string[] = [];
  for (const c of storable) {
    const r = engine(c);
    const res = await app.request('POST', `/api/ofrep/v1/evaluate/flags/${encodeURIComponent(c.flagKey)}`, {
      listener: 'data',
      token: fx.readToken,
      headers: { 'x-service-id': serviceOf.get(c)!, 'x-environment': 'development' },
      body: { context: c.context },
    });
    let ok: boolean;
    if (r.reason === 'ERROR') {
      const errorCode = OFREP_ERROR[r.errorCode!] ?? r.errorCode;
      ok = res.status === (r.errorCode === 'FLAG_NOT_FOUND' ? 404 : 400) && res.body.key === c.flagKey && res.body.errorCode === errorCode;
    } else {
      ok =
        res.status === 200 &&
        JSON.stringify(res.body.value) === JSON.stringify(r.value) &&
        res.body.reason === (r.disabled ? 'DISABLED' : OFREP_REASON[r.reason]) &&
        res.body.variant === r.variant;
    }
    if (!ok) mismatches.push(`${c.name}: ${res.status} ${res.text} vs ${JSON.stringify(r)}`);
    const problems = singleProblems(res);
    if (problems.length > 0) mismatches.push(`${c.name}: not in the published schema: ${problems.join('; ')}`);
  }
  expect(mismatches).toEqual([]);
});

type Rpc = 'resolveBoolean' | 'resolveString' | 'resolveFloat' | 'resolveObject';
const RPC_OF: Record<FlagType, Rpc> = { boolean: 'resolveBoolean', string: 'resolveString', number: 'resolveFloat', object: 'resolveObject' };

function typeOfDefault(v: unknown): FlagType {
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number') return 'number';
  return 'object';
}

/** The typed call a Connect client makes for a case, and the default it can express. */
function typedCall(c: Case) {
  const type: FlagType = c.expectedType ?? (c.flag ? (c.flag.type as FlagType) : typeOfDefault(c.defaultValue));
  const fits = type === 'object' ? true : typeof c.defaultValue === (type === 'number' ? 'number' : type);
  const defaultValue = !fits ? undefined : type === 'object' ? fromJson(ValueSchema, (c.defaultValue ?? null) as JsonValue) : c.defaultValue;
  return { type, rpc: RPC_OF[type], defaultValue, fits };
}

const ZERO: Record<FlagType, unknown> = { boolean: false, string: '', number: 0, object: undefined };

async function viaRpc(client: Client<typeof EvaluationService>, label: string) {
  const mismatches: string[] = [];
  let skipped = 0;
  for (const c of storable) {
    // A protobuf Struct carries only objects: a non-object context cannot be sent at all.
    if (!isObject(c.context)) {
      skipped++;
      continue;
    }
    const { type, rpc, defaultValue, fits } = typedCall(c);
    const r = engine(c, type);
    const request = { flagKey: c.flagKey, serviceId: serviceOf.get(c)!, environment: 'development', context: c.context as never, defaultValue } as never;
    const res = (await (client[rpc] as (req: never, opts: unknown) => Promise<any>)(request, { headers: { Authorization: `Bearer ${fx.readToken}` } })) as {
      value: unknown;
      reason: string;
      variant: string;
      errorCode: string;
    };
    const got = type === 'object' && res.value !== undefined ? toJson(ValueSchema, res.value as never) : res.value;
    const wantValue = r.value === undefined || (r.reason === 'ERROR' && !fits) ? ZERO[type] : r.value;
    const ok =
      res.reason === r.reason &&
      res.variant === (r.variant ?? '') &&
      res.errorCode === (r.errorCode ?? '') &&
      JSON.stringify(got ?? null) === JSON.stringify(type === 'object' ? (wantValue ?? null) : wantValue);
    if (!ok) mismatches.push(`${label} ${c.name}: ${JSON.stringify({ ...res, value: got })} vs ${JSON.stringify(r)}`);
  }
  expect(mismatches).toEqual([]);
  // Exactly the non-object contexts of the case file are not representable.
  expect(skipped).toBe(storable.filter((c) => !isObject(c.context)).length);
}

it('Connect agrees with the engine on every case a protobuf request can carry', async () => {
  const client = createClient(EvaluationService, createConnectTransport({ baseUrl: `${app.urls.data}/api/connect`, httpVersion: '1.1', useBinaryFormat: true }));
  await viaRpc(client, 'connect');
});

it('gRPC-Web agrees with the engine on every case a protobuf request can carry', async () => {
  const client = createClient(EvaluationService, createGrpcWebTransport({ baseUrl: `${app.urls.data}/api/grpc-web`, httpVersion: '1.1' }));
  await viaRpc(client, 'grpc-web');
});
