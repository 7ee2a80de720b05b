import { BatchBody, quickBatchBody } from '../../api/features/evaluation/schemas';

const item = (i: number) => ({ key: `px-${i}` });
const base = { serviceId: 'svc_1', environment: 'development', flags: [{ flagKey: 'a' }, { key: 'b', defaultValue: 3 }], context: { targetingKey: 'u' } };

// Bodies the quick check must pass through unchanged, and bodies it must leave to zod.
const valid: unknown[] = [
  base,
  { serviceId: 's', flags: [{ key: 'k' }] },
  { serviceId: 's', flags: Array.from({ length: 4096 }, (_, i) => item(i)) },
  { serviceId: 's', flags: [{ flagKey: 'k', key: 'other', defaultValue: null }], context: null },
  { serviceId: 's'.repeat(128), environment: 'production', flags: [{ flagKey: 'k'.repeat(256) }], context: 'not an object' },
];
const invalid: unknown[] = [
  null,
  [],
  'x',
  {},
  { ...base, extra: 1 },
  { ...base, serviceId: '' },
  { ...base, serviceId: 's'.repeat(129) },
  { ...base, serviceId: 7 },
  { ...base, environment: 'prod' },
  { ...base, environment: null },
  { ...base, flags: [] },
  { ...base, flags: {} },
  { ...base, flags: Array.from({ length: 4097 }, (_, i) => item(i)) },
  { ...base, flags: [null] },
  { ...base, flags: [[]] },
  { ...base, flags: [{}] },
  { ...base, flags: [{ defaultValue: 1 }] },
  { ...base, flags: [{ key: '' }] },
  { ...base, flags: [{ flagKey: 'k'.repeat(257) }] },
  { ...base, flags: [{ flagKey: 'ok', key: '' }] },
  { ...base, flags: [{ flagKey: 5 }] },
  { ...base, flags: [{ key: 'k', extra: true }] },
  JSON.parse('{"serviceId":"s","flags":[{"key":"k"}],"__proto__":{"x":1}}'),
];

describe('quickBatchBody (the demo batch fast path) agrees with zod', () => {
  it.each(valid.map((body, i) => [i, body]))('valid body %i passes both, unchanged', (_i, body) => {
    expect(BatchBody.safeParse(body).success).toBe(true);
    expect(quickBatchBody(body)).toBe(body);
  });

  it.each(invalid.map((body, i) => [i, body]))('body %i is left to zod', (_i, body) => {
    expect(quickBatchBody(body)).toBeUndefined();
  });

  it('the bodies it leaves to zod are ones zod rejects (so the 400 comes from zod)', () => {
    for (const body of invalid) expect(BatchBody.safeParse(body).success).toBe(false);
  });
});
