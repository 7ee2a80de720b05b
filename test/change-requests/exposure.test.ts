import { reducesExposure } from '../../api/features/change-requests/gate';
import type { FlagContent } from '../../api/features/flags/types';

/** What counts as only reducing exposure (docs/change-requests.md#emergency-reduce): pure logic. */

const base: FlagContent = {
  name: 'checkout',
  description: '',
  type: 'boolean',
  enabled: true,
  defaultValue: false,
  tags: [],
  variants: [],
  targeting: [
    { id: 'a', conditions: [{ property: 'plan', operator: 'equals', value: 'pro' }], value: true, rolloutPercentage: 50 },
    { id: 'b', conditions: [], value: true },
  ],
  isPublic: false,
};
const withRollouts = (a: number | undefined, b: number | undefined): FlagContent => ({
  ...base,
  targeting: [
    { ...base.targeting[0], rolloutPercentage: a },
    { ...base.targeting[1], rolloutPercentage: b },
  ],
});

it('switching a flag off reduces exposure, switching it on does not', () => {
  expect(reducesExposure('toggle', base, { ...base, enabled: false })).toBe(true);
  expect(reducesExposure('toggle', { ...base, enabled: false }, base)).toBe(false);
  expect(reducesExposure('update', base, { ...withRollouts(10, 100), enabled: false })).toBe(true);
});

it('lowering rollout reduces exposure; raising any, or a rule without a percentage going to one above it, does not', () => {
  expect(reducesExposure('update', base, withRollouts(20, undefined))).toBe(true);
  expect(reducesExposure('update', base, withRollouts(50, 30))).toBe(true);
  expect(reducesExposure('update', base, withRollouts(60, 30))).toBe(false);
  expect(reducesExposure('update', base, withRollouts(50, undefined))).toBe(false);
});

it('any other change widens or alters what is served', () => {
  expect(reducesExposure('update', base, { ...base, defaultValue: true })).toBe(false);
  expect(reducesExposure('update', base, { ...withRollouts(10, undefined), description: 'x' })).toBe(false);
  expect(reducesExposure('update', base, { ...base, targeting: [base.targeting[1], base.targeting[0]] })).toBe(false);
  expect(reducesExposure('update', base, { ...base, targeting: [base.targeting[0]] })).toBe(false);
  expect(reducesExposure('update', base, { ...base, targeting: [{ ...base.targeting[0], value: false, rolloutPercentage: 10 }, base.targeting[1]] })).toBe(false);
  expect(reducesExposure('create', null, base)).toBe(false);
  expect(reducesExposure('delete', base, null)).toBe(false);
});

it('a rollback restores what was reviewed when it was written', () => {
  expect(reducesExposure('rollback', base, { ...base, defaultValue: true })).toBe(true);
});
