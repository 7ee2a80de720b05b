import { randomBytes } from 'node:crypto';
import { fromJson, toJson, type JsonValue } from '@bufbuild/protobuf';
import { ValueSchema } from '@bufbuild/protobuf/wkt';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { OpenFeature } from '@openfeature/server-sdk';
import fc from 'fast-check';
import { compileFlag, evaluate, type Condition, type EvaluationResult, type FlagDefinition, type FlagType } from '../../api/features/evaluation/engine/index';
import { EvaluationService } from '../../api/gen/flags/v1/evaluation_pb';
import cases from '../evaluation/cases.json';
import { startTestApp, type TestApp } from '../support/harness';
import { singleProblems } from '../support/ofrep-schema';
import { APPROXIMATIONS, PYTHON_DIFFERENCES } from '../flagd/approximations';
import { connectJsProvider, disagreement, evaluateWith, isTranslatable, pythonWithProvider, runPythonCases, type ProviderAnswer, type ProviderCase } from '../flagd/providers';
import { createFixture, storeFlag, type DataPlaneFixture } from './support';

/**
 * Every case of test/evaluation/cases.json through REST, OFREP, Connect and gRPC-Web: each
 * protocol must agree with the engine (value, reason, variant, error code), as each protocol
 * expresses them; then through the published flagd providers (below). Stored flags are written straight into Postgres, because many cases hold
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
  for (const c of storable) {
    const def = c.flag ? JSON.stringify(c.flag) : null;
    let service = services.find((s) => (def === null ? !s.defs.has(c.flagKey) : !s.defs.has(c.flagKey) || s.defs.get(c.flagKey) === def));
    if (!service) {
      const res = await fx.owner.request('POST', '/api/services', { projectId: fx.projectId, name: `diff-${services.length}-${randomBytes(2).toString('hex')}` });
      if (res.status !== 201) throw new Error(res.text);
      service = { id: res.body.id, defs: new Map() };
      services.push(service);
    }
    if (def !== null && !service.defs.has(c.flagKey)) await storeFlag(app, { projectId: fx.projectId, serviceId: service.id, environment: 'development' }, c.flag!);
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

// ---------------------------------------------------------------------------------------------
// The published flagd providers (docs/local-evaluation.md): the JS one in in-process mode (its
// flag set from our FLAGD_SYNC_PORT, evaluated by flagd-core) and in RPC mode (FLAGD_PORT), and
// the Python one in in-process mode, each selecting a service's flag set with a bound token.
// Values and variants equal ours for every case a provider can be asked (an object context, a
// default of the call's type); a flag whose translation is not exact answers, in-process, the
// caller's default with reason ERROR, never another value (docs/flagd.md).

/** Flags and contexts from fast-check, beside the case file: odd rule shapes nobody wrote by hand. */
const GENERATED_FLAGS = 25;
const GENERATED_CONTEXTS = 8;
const SEED = 20261126;

const conditionArb: fc.Arbitrary<Condition> = fc.oneof(
  fc.record({ property: fc.constant('plan'), operator: fc.constantFrom('equals', 'not_equals'), value: fc.constantFrom('free', 'pro', 'team') }),
  fc.record({ property: fc.constant('country'), operator: fc.constantFrom('in', 'not_in'), value: fc.subarray(['FR', 'DE', 'US', 'JP'], { minLength: 1 }) }),
  fc.record({ property: fc.constant('email'), operator: fc.constantFrom('contains', 'starts_with', 'ends_with'), value: fc.constantFrom('@example.com', 'ann', '.org') }),
  fc.record({ property: fc.constant('age'), operator: fc.constantFrom('gt', 'gte', 'lt', 'lte'), value: fc.integer({ min: 0, max: 100 }) }),
  fc.record({ property: fc.constant('version'), operator: fc.constantFrom('semver_eq', 'semver_gt', 'semver_lt'), value: fc.constantFrom('1.0.0', '1.2.3', '2.0.0-beta.1') }),
  fc.record({ property: fc.constantFrom('plan', 'country', 'age'), operator: fc.constant('exists') }),
);

const generatedFlagArb = (index: number): fc.Arbitrary<FlagDefinition> =>
  fc.constantFrom<'boolean' | 'string'>('boolean', 'string').chain((type) => {
    const value = type === 'boolean' ? fc.boolean() : fc.constantFrom('red', 'green', 'blue');
    const rule = (i: number) =>
      fc.record(
        {
          id: fc.constant(`r${i}`),
          conditions: fc.array(conditionArb, { maxLength: 2 }),
          value,
          rolloutPercentage: fc.constantFrom(0, 10, 33.333, 50, 100),
        },
        { requiredKeys: ['id', 'conditions', 'value'] },
      );
    return fc.record({
      key: fc.constant(`generated-${index}`),
      type: fc.constant(type),
      enabled: fc.boolean().map((b) => b || index % 5 !== 0),
      defaultValue: value,
      variants: fc.oneof(
        fc.constant([]),
        fc.tuple(value, value, fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 60 })).map(([a, b, wa, wb]) => [
          { name: 'first', value: a, weight: wa },
          { name: 'second', value: b, weight: wb },
        ]),
      ),
      targeting: fc.integer({ min: 0, max: 3 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => rule(i)))),
    }) as fc.Arbitrary<FlagDefinition>;
  });

const contextArb: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    targetingKey: fc.oneof(fc.uuid(), fc.string({ minLength: 1, maxLength: 12 })),
    plan: fc.constantFrom('free', 'pro', 'team'),
    country: fc.constantFrom('FR', 'DE', 'US', 'JP', 'BR'),
    email: fc.constantFrom('ann@example.com', 'bob@corp.org', 'annie@x.io'),
    // Numbers only: numeric strings are a documented approximation (test/flagd/approximations.ts).
    age: fc.integer({ min: 0, max: 100 }),
    version: fc.constantFrom('1.0.0', '1.2.3', '2.0.0', '2.0.0-beta.1', 'v1'),
  },
  { requiredKeys: [] },
);

interface ProviderColumnCase extends ProviderCase {
  name: string;
  serviceId: string;
  /** Our answer for the typed call. */
  ours: EvaluationResult;
  translatable: boolean;
}

/** Every case a provider can be asked: an object context, a default its typed call can carry. */
const providerCases: ProviderColumnCase[] = [];
/** The bound token of each service: its flag set's selector. */
const selectorOf = new Map<string, string>();
let generatedServiceId: string;

beforeAll(async () => {
  for (const c of storable) {
    const { type, fits } = typedCall(c);
    if (!isObject(c.context) || !fits) continue;
    providerCases.push({
      name: c.name,
      serviceId: serviceOf.get(c)!,
      flagKey: c.flagKey,
      type,
      defaultValue: c.defaultValue,
      context: c.context as Record<string, unknown>,
      ours: engine(c, type),
      translatable: c.flag === null || isTranslatable(c.flag as FlagDefinition),
    });
  }
  const service = await fx.owner.request('POST', '/api/services', { projectId: fx.projectId, name: `generated-${randomBytes(2).toString('hex')}` });
  if (service.status !== 201) throw new Error(service.text);
  generatedServiceId = service.body.id;
  const flags = Array.from({ length: GENERATED_FLAGS }, (_, i) => fc.sample(generatedFlagArb(i), { seed: SEED + i, numRuns: 1 })[0]);
  const contexts = fc.sample(contextArb, { seed: SEED, numRuns: GENERATED_CONTEXTS });
  for (const flag of flags) {
    await storeFlag(app, { projectId: fx.projectId, serviceId: generatedServiceId, environment: 'development' }, flag);
    const defaultValue = flag.type === 'boolean' ? false : 'caller-default';
    contexts.forEach((context, i) => {
      const ours = evaluate(compileFlag(flag), flag.key, context as never, defaultValue, { expectedType: flag.type });
      const name = `generated ${flag.key} (${JSON.stringify(flag)}) context ${i} (${JSON.stringify(context)})`;
      providerCases.push({ name, serviceId: generatedServiceId, flagKey: flag.key, type: flag.type, defaultValue, context, ours, translatable: isTranslatable(flag) });
    });
  }
  for (const serviceId of new Set(providerCases.map((c) => c.serviceId))) {
    const res = await fx.owner.request('POST', `/api/projects/${fx.projectId}/tokens`, {
      name: `flagd-${randomBytes(2).toString('hex')}`,
      permissions: { read: true },
      scope: { serviceId, environment: 'development' },
    });
    if (res.status !== 201) throw new Error(res.text);
    selectorOf.set(serviceId, res.body.value);
  }
});
afterAll(() => OpenFeature.clearProviders());

/** Connects one JS provider per service, asks each case of the service, and lists the disagreements. */
async function viaJsProvider(mode: 'in-process' | 'rpc', port: number, want: (c: ProviderColumnCase, got: ProviderAnswer) => string) {
  const mismatches: string[] = [];
  for (const [serviceId, selector] of selectorOf) {
    const provider = await connectJsProvider(mode, port, selector);
    try {
      for (const c of providerCases.filter((x) => x.serviceId === serviceId)) {
        const why = want(c, await evaluateWith(provider.client, c));
        if (why) mismatches.push(`${mode} ${c.name}: ${why}`);
      }
    } finally {
      await provider.close();
    }
  }
  return mismatches;
}

/**
 * In-process: equal to ours where the translation is exact, else ERROR with the caller's default;
 * a documented approximation must still answer one of the flag's values, never an error.
 */
function inProcessDisagreement(c: ProviderColumnCase, got: ProviderAnswer): string {
  if (c.name in APPROXIMATIONS) return got.reason === 'ERROR' ? `approximated (${APPROXIMATIONS[c.name]}) but answered ERROR` : '';
  if (c.translatable) return disagreement(c.ours, c, got);
  return got.reason === 'ERROR' && JSON.stringify(got.value) === JSON.stringify(c.defaultValue) ? '' : `untranslatable: want ERROR with the default, got ${JSON.stringify(got)}`;
}

it('the provider columns cover the case file and the generated flags', () => {
  expect(providerCases.filter((c) => !c.name.startsWith('generated')).length).toBeGreaterThan(400);
  expect(providerCases.filter((c) => c.name.startsWith('generated')).length).toBe(GENERATED_FLAGS * GENERATED_CONTEXTS);
  // Most flags translate exactly; the rest are the documented impossible operators.
  expect(providerCases.filter((c) => c.translatable).length).toBeGreaterThan(providerCases.length * 0.8);
});

it('the JS flagd provider in in-process mode agrees with REST on every case', async () => {
  expect(await viaJsProvider('in-process', Number(new URL(app.urls.flagdSync!).port), inProcessDisagreement)).toEqual([]);
});

it('the JS flagd provider in RPC mode agrees with REST on every case, untranslatable flags included', async () => {
  const rpcDisagreement = (c: ProviderColumnCase, got: ProviderAnswer) => {
    // flagd's ResolveObject answers a Struct, which cannot hold an array: a type mismatch there,
    // as flagd answers it, so the caller's default, never another value.
    if (c.type === 'object' && Array.isArray(c.ours.value)) {
      return got.reason === 'ERROR' && JSON.stringify(got.value) === JSON.stringify(c.defaultValue) ? '' : `an array over ResolveObject: want ERROR with the default, got ${JSON.stringify(got)}`;
    }
    const why = disagreement(c.ours, c, got);
    if (why || c.ours.reason === 'ERROR') return why;
    const reason = c.ours.disabled ? 'DISABLED' : OFREP_REASON[c.ours.reason];
    return got.reason === reason ? '' : `reason ${got.reason} != ${reason}`;
  };
  expect(await viaJsProvider('rpc', Number(new URL(app.urls.flagd!).port), rpcDisagreement)).toEqual([]);
});

const python = pythonWithProvider();
(python ? it : it.skip)(
  python
    ? 'the Python flagd provider in in-process mode agrees with REST on every case'
    : 'the Python flagd provider in in-process mode agrees with REST on every case (skipped: FLAGD_PYTHON_PATH is unset; scripts/test-infra.sh provisions it)',
  async () => {
    const asked = providerCases.map((c) => ({ selector: selectorOf.get(c.serviceId)!, flagKey: c.flagKey, type: c.type, defaultValue: c.defaultValue, context: c.context }));
    const answers = await runPythonCases(python!, Number(new URL(app.urls.flagdSync!).port), asked);
    const mismatches = providerCases
      .filter((c) => !(c.name in PYTHON_DIFFERENCES))
      .map((c) => {
        const why = inProcessDisagreement(c, answers[providerCases.indexOf(c)]);
        return why && `python ${c.name}: ${why}`;
      })
      .filter(Boolean);
    expect(mismatches).toEqual([]);
  },
  120_000,
);
