/**
 * The cases of test/evaluation/cases.json where an in-process flagd provider answers differently
 * from us by design, and why: docs/flagd.md#operators lists each approximation. Every other
 * translatable case must agree exactly.
 */
export const APPROXIMATIONS: Record<string, string> = {
  'gt: numeric string attribute': 'numeric strings do not compare in-process',
  'gt: decimal string attribute': 'numeric strings do not compare in-process',
  'gt: exponent string attribute': 'numeric strings do not compare in-process',
  'gte: equal numeric string': 'numeric strings do not compare in-process',
  'lt: negative string': 'numeric strings do not compare in-process',
  'lte: smaller numeric string': 'numeric strings do not compare in-process',
  'semver_eq: blanks are invalid': 'flagd trims blanks around a version',
  'semver_gt: numbers beyond 2^53 compare exactly': 'flagd-core refuses version numbers beyond 2^53',
  'lookup: exact dotted key wins': 'flagd always reads a dotted name as a path',
};

/**
 * Where the Python provider alone answers differently from us and from the other providers, and
 * why (docs/flagd.md#providers): its JsonLogic compares booleans and numbers loosely, and its
 * float resolution reads a boolean as a number.
 */
export const PYTHON_DIFFERENCES: Record<string, string> = {
  'equals: zero is not false': "Python's === takes False and 0 as equal",
  'equals: one is not true': "Python's === takes True and 1 as equal",
  'gt: negative operand': 'an attribute 0 or 1 does not count as a number in Python',
  'expected type number for a boolean flag': "the Python provider's float resolution answers a boolean as 1.0 or 0.0",
};

/** Where flagd itself (Go) answers differently, and why (docs/flagd.md#providers). */
export const GO_DIFFERENCES: Record<string, string> = {
  'not_equals: object attribute is not comparable': "Go's in errors on an object attribute: ERROR with the caller's default",
  'in: object attribute is not comparable': "Go's in errors on an object attribute: ERROR with the caller's default",
  'contains: array membership is type-strict': 'Go\'s in finds 5 in ["5"]',
};
