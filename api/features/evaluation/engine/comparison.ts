/** Reading context attributes and operands as comparable values: primitives and numbers. */

export type Primitive = string | number | boolean;

export function isPrimitive(value: unknown): value is Primitive {
  const type = typeof value;
  return type === 'string' || type === 'number' || type === 'boolean';
}

const NUMERIC_STRING = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A finite number from a number or a decimal numeric string; NaN otherwise. */
export function toComparableNumber(value: unknown): number {
  if (typeof value === 'number') return Number.isFinite(value) ? value : NaN;
  if (typeof value === 'string' && value.length <= 64 && NUMERIC_STRING.test(value)) {
    const parsed = Number(value);
    return Number.isFinite(parsed) ? parsed : NaN;
  }
  return NaN;
}
