/**
 * Checks OFREP answers against the published OpenAPI document (open-feature/protocol,
 * service/openapi.yaml, version 0.3.0), written from it by hand: the statuses each operation
 * documents, the required fields, and the reason and error-code enums. What the document leaves
 * open (401, 403 and 429 bodies) is not checked; extra fields are allowed, as the document allows.
 */

/** evaluationSuccess.reason */
export const OFREP_REASONS = ['STATIC', 'TARGETING_MATCH', 'SPLIT', 'DISABLED', 'UNKNOWN'] as const;
/** evaluationFailure.errorCode (400 on a single flag, or an entry of a bulk answer) */
export const OFREP_FAILURE_CODES = ['PARSE_ERROR', 'TARGETING_KEY_MISSING', 'INVALID_CONTEXT', 'GENERAL'] as const;
/** flagNotFound.errorCode (404 on a single flag) */
export const OFREP_NOT_FOUND_CODES = ['FLAG_NOT_FOUND'] as const;

const SINGLE_STATUSES = [200, 400, 401, 403, 404, 429, 500];
const BULK_STATUSES = [200, 304, 400, 401, 403, 429, 500];

interface Answer {
  status: number;
  body: unknown;
}

export interface SchemaOptions {
  /** Statuses the document does not list that this request may get (413 for an oversized body ...). */
  alsoStatuses?: number[];
}

/** Problems of a POST /ofrep/v1/evaluate/flags/{key} answer ([] when it conforms). */
export function singleProblems(res: Answer, opts: SchemaOptions = {}): string[] {
  if (!SINGLE_STATUSES.includes(res.status)) return opts.alsoStatuses?.includes(res.status) ? [] : [`status ${res.status} is not documented`];
  const body = res.body;
  switch (res.status) {
    case 200:
      return successProblems(body, 'body');
    case 400:
      return failureProblems(body, 'body', OFREP_FAILURE_CODES);
    case 404:
      return failureProblems(body, 'body', OFREP_NOT_FOUND_CODES);
    case 500:
      return generalErrorProblems(body);
    default:
      return [];
  }
}

/** Problems of a POST /ofrep/v1/evaluate/flags answer ([] when it conforms). */
export function bulkProblems(res: Answer & { text?: string }, opts: SchemaOptions = {}): string[] {
  if (!BULK_STATUSES.includes(res.status)) return opts.alsoStatuses?.includes(res.status) ? [] : [`status ${res.status} is not documented`];
  const body = res.body;
  switch (res.status) {
    case 200:
      return bulkSuccessProblems(body);
    case 304:
      return body === undefined || body === '' ? [] : ['304 has a body'];
    case 400: {
      // bulkEvaluationFailure: errorCode (any string) required, errorDetails optional.
      if (!isObject(body)) return ['body is not an object'];
      const problems: string[] = [];
      if (typeof body.errorCode !== 'string') problems.push('body.errorCode is required (string)');
      if (body.errorDetails !== undefined && typeof body.errorDetails !== 'string') problems.push('body.errorDetails is not a string');
      return problems;
    }
    case 500:
      return generalErrorProblems(body);
    default:
      return [];
  }
}

/** Problems of one event-stream message's `data` (sseEventData), parsed from JSON. */
export function eventDataProblems(data: unknown): string[] {
  if (!isObject(data)) return ['data is not an object'];
  const problems: string[] = [];
  if (typeof data.type !== 'string') problems.push('data.type is required (string)');
  if (data.etag !== undefined && typeof data.etag !== 'string') problems.push('data.etag is not a string');
  if (data.lastModified !== undefined) {
    const lm = data.lastModified;
    const ok = (Number.isInteger(lm) && (lm as number) >= 0) || (typeof lm === 'string' && isDateTime(lm));
    if (!ok) problems.push('data.lastModified is neither a non-negative integer nor a date-time');
  }
  return problems;
}

/** Throws with every problem, so a test failure names what the document wants. */
export function expectOfrepSingle(res: Answer, opts?: SchemaOptions): void {
  assertNone(singleProblems(res, opts), 'single evaluation', res);
}

export function expectOfrepBulk(res: Answer, opts?: SchemaOptions): void {
  assertNone(bulkProblems(res, opts), 'bulk evaluation', res);
}

export function expectOfrepEventData(data: unknown): void {
  assertNone(eventDataProblems(data), 'event-stream message', { status: 200, body: data });
}

function assertNone(problems: string[], what: string, res: Answer) {
  if (problems.length > 0) throw new Error(`OFREP ${what} (${res.status}) does not conform to the published schema: ${problems.join('; ')}\n${JSON.stringify(res.body)}`);
}

function bulkSuccessProblems(body: unknown): string[] {
  if (!isObject(body)) return ['body is not an object'];
  if (!Array.isArray(body.flags)) return ['body.flags is required (array)'];
  const problems: string[] = [];
  body.flags.forEach((item: unknown, i: number) => {
    // Each item is oneOf evaluationSuccess / evaluationFailure: a failure has an errorCode.
    if (isObject(item) && 'errorCode' in item) problems.push(...failureProblems(item, `flags[${i}]`, OFREP_FAILURE_CODES));
    else problems.push(...successProblems(item, `flags[${i}]`));
  });
  if (body.metadata !== undefined) problems.push(...metadataProblems(body.metadata, 'body.metadata'));
  if (body.eventStreams !== undefined) {
    if (!Array.isArray(body.eventStreams)) problems.push('body.eventStreams is not an array');
    else body.eventStreams.forEach((s: unknown, i: number) => problems.push(...eventStreamProblems(s, `eventStreams[${i}]`)));
  }
  return problems;
}

function successProblems(item: unknown, at: string): string[] {
  if (!isObject(item)) return [`${at} is not an object`];
  const problems: string[] = [];
  if (typeof item.key !== 'string') problems.push(`${at}.key is required (string)`);
  if (typeof item.reason !== 'string') problems.push(`${at}.reason is required`);
  else if (!(OFREP_REASONS as readonly string[]).includes(item.reason)) problems.push(`${at}.reason ${item.reason} is not one of ${OFREP_REASONS.join(', ')}`);
  if (item.variant !== undefined && typeof item.variant !== 'string') problems.push(`${at}.variant is not a string`);
  // value: boolean, string, integer, float or object (OpenFeature's object type is any JSON
  // structure, arrays included; the document's codeDefaultFlag branch admits them too); absent
  // means "use the code default".
  if ('value' in item) {
    const v = item.value;
    const ok = typeof v === 'boolean' || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)) || isObject(v) || Array.isArray(v);
    if (!ok) problems.push(`${at}.value is not a boolean, string, number or object`);
  }
  if (item.metadata !== undefined) problems.push(...metadataProblems(item.metadata, `${at}.metadata`));
  return problems;
}

function failureProblems(item: unknown, at: string, codes: readonly string[]): string[] {
  if (!isObject(item)) return [`${at} is not an object`];
  const problems: string[] = [];
  if (typeof item.key !== 'string') problems.push(`${at}.key is required (string)`);
  if (typeof item.errorCode !== 'string') problems.push(`${at}.errorCode is required`);
  else if (!codes.includes(item.errorCode)) problems.push(`${at}.errorCode ${item.errorCode} is not one of ${codes.join(', ')}`);
  if (item.errorDetails !== undefined && typeof item.errorDetails !== 'string') problems.push(`${at}.errorDetails is not a string`);
  if (item.metadata !== undefined) problems.push(...metadataProblems(item.metadata, `${at}.metadata`));
  return problems;
}

function generalErrorProblems(body: unknown): string[] {
  if (!isObject(body)) return ['body is not an object'];
  return body.errorDetails === undefined || typeof body.errorDetails === 'string' ? [] : ['body.errorDetails is not a string'];
}

/** metadata: an object whose values are booleans, strings or numbers. */
function metadataProblems(metadata: unknown, at: string): string[] {
  if (!isObject(metadata)) return [`${at} is not an object`];
  return Object.entries(metadata)
    .filter(([, v]) => !['boolean', 'string', 'number'].includes(typeof v))
    .map(([k]) => `${at}.${k} is not a boolean, string or number`);
}

/** eventStream: type required; exactly one of url (a URI) and endpoint ({requestUri: "/...", origin?}); inactivityDelaySec an integer >= 1. */
function eventStreamProblems(s: unknown, at: string): string[] {
  if (!isObject(s)) return [`${at} is not an object`];
  const problems: string[] = [];
  if (typeof s.type !== 'string') problems.push(`${at}.type is required (string)`);
  const hasUrl = s.url !== undefined;
  const hasEndpoint = s.endpoint !== undefined;
  if (hasUrl === hasEndpoint) problems.push(`${at} needs exactly one of url and endpoint`);
  if (hasUrl && !isUri(s.url)) problems.push(`${at}.url is not a URI`);
  if (hasEndpoint) {
    const e = s.endpoint;
    if (!isObject(e) || typeof e.requestUri !== 'string' || !e.requestUri.startsWith('/')) problems.push(`${at}.endpoint.requestUri is required and starts with /`);
    else if (e.origin !== undefined && !isUri(e.origin)) problems.push(`${at}.endpoint.origin is not a URI`);
  }
  if (s.inactivityDelaySec !== undefined && !(Number.isInteger(s.inactivityDelaySec) && (s.inactivityDelaySec as number) >= 1)) {
    problems.push(`${at}.inactivityDelaySec is not an integer >= 1`);
  }
  return problems;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isUri(v: unknown): boolean {
  if (typeof v !== 'string') return false;
  try {
    new URL(v);
    return true;
  } catch {
    return false;
  }
}

function isDateTime(s: string): boolean {
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i.test(s) && !Number.isNaN(Date.parse(s));
}
