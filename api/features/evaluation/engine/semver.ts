/** Semantic Versioning 2.0.0: parsing and precedence (section 11) for the semver_* operators. */

export interface Semver {
  /** Decimal digit strings without leading zeros, so any size compares exactly. */
  readonly major: string;
  readonly minor: string;
  readonly patch: string;
  readonly prerelease: readonly string[];
}

const SEMVER =
  /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;
const DIGITS = /^\d+$/;

export function parseSemver(text: string): Semver | undefined {
  if (text.length > 256) return undefined;
  const match = SEMVER.exec(text);
  if (match === null) return undefined;
  const prerelease = match[4] === undefined ? [] : match[4].split('.');
  for (const identifier of prerelease) {
    if (identifier.length > 1 && identifier[0] === '0' && DIGITS.test(identifier)) return undefined;
  }
  return { major: match[1], minor: match[2], patch: match[3], prerelease };
}

function compareDigitStrings(a: string, b: string): number {
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Semantic Versioning 2.0.0 precedence: negative, zero or positive like a sort comparator. */
export function compareSemver(a: Semver, b: Semver): number {
  const core =
    compareDigitStrings(a.major, b.major) ||
    compareDigitStrings(a.minor, b.minor) ||
    compareDigitStrings(a.patch, b.patch);
  if (core !== 0) return core;
  const left = a.prerelease;
  const right = b.prerelease;
  // A release ranks above any of its prereleases.
  if (left.length === 0 || right.length === 0) return right.length - left.length;
  const shared = Math.min(left.length, right.length);
  for (let i = 0; i < shared; i++) {
    const order = comparePrereleaseIdentifiers(left[i], right[i]);
    if (order !== 0) return order;
  }
  return left.length - right.length;
}

function comparePrereleaseIdentifiers(a: string, b: string): number {
  const aNumeric = DIGITS.test(a);
  const bNumeric = DIGITS.test(b);
  if (aNumeric && bNumeric) return compareDigitStrings(a, b);
  if (aNumeric !== bNumeric) return aNumeric ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
