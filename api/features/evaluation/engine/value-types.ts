import type { FlagType } from './types';

/**
 * Whether `value` is a value of the declared flag type. `number` means a finite number
 * (JSON cannot carry NaN or Infinity); `object` means a JSON object or array, never null.
 * Used on every evaluation result and by flag write validation.
 */
export function valueMatchesType(type: FlagType, value: unknown): boolean {
  switch (type) {
    case 'boolean':
      return typeof value === 'boolean';
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'object':
      return typeof value === 'object' && value !== null;
    default:
      return false;
  }
}

/** The flag type a value would have, or undefined for null, undefined and non-finite numbers. */
export function typeOfValue(value: unknown): FlagType | undefined {
  switch (typeof value) {
    case 'boolean':
      return 'boolean';
    case 'string':
      return 'string';
    case 'number':
      return Number.isFinite(value) ? 'number' : undefined;
    case 'object':
      return value === null ? undefined : 'object';
    default:
      return undefined;
  }
}
