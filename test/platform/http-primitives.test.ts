import { checkBodyHeaders } from '../../api/http/body';
import { HttpError, badRequest, malformedJson, personalTokenRefused, retryLater, validationFailed } from '../../api/http/errors';
import { rateHeaders, tighter, type RateDecision } from '../../api/http/rate-limit';
import { requestIdOf } from '../../api/http/request-id';

/** The HTTP pieces Express and the lean path share. */
describe('error codes', () => {
  it('gives every error a machine code from its status unless its maker names a finer one', () => {
    expect(new HttpError(404, 'Flag not found').code).toBe('not_found');
    expect(new HttpError(418, 'teapot').code).toBe('client_error');
    expect(new HttpError(502, 'upstream').code).toBe('internal');
    expect(retryLater(429, 'slow down', 3).code).toBe('rate_limited');
    expect(badRequest('bad').code).toBe('bad_request');
    expect(malformedJson().code).toBe('malformed_json');
    expect(personalTokenRefused().code).toBe('personal_token_refused');
  });

  it('keeps the code out of the envelope', () => {
    expect(personalTokenRefused().toBody()).toEqual({
      error: 'FORBIDDEN',
      message: 'Forbidden: personal tokens cannot evaluate flags or call SDK endpoints; use a project API token',
    });
    expect(malformedJson().toBody()).toEqual({ error: 'Bad Request', message: 'Malformed JSON body' });
  });

  it('words validation failures one way, with their details', () => {
    const error = validationFailed([
      { path: 'body.flagKey', message: 'Required' },
      { path: 'query.limit', message: 'Expected number' },
    ]);
    expect(error.code).toBe('validation_failed');
    expect(error.toBody()).toEqual({
      error: 'Bad Request',
      message: 'Validation failed: body.flagKey: Required; query.limit: Expected number',
      details: [
        { path: 'body.flagKey', message: 'Required' },
        { path: 'query.limit', message: 'Expected number' },
      ],
    });
  });
});

describe('request ids', () => {
  it("keeps the caller's plain id and makes a unique UUID-shaped one otherwise", () => {
    expect(requestIdOf('trace-abc.123_X')).toBe('trace-abc.123_X');
    const made = [requestIdOf(undefined), requestIdOf('bad id'), requestIdOf('x'.repeat(129)), requestIdOf(['a', 'b'])];
    for (const id of made) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(new Set(made).size).toBe(made.length);
  });
});

describe('body headers', () => {
  const json = { 'content-type': 'application/json', 'content-length': '10' };
  it('tells no body from a body to read', () => {
    expect(checkBodyHeaders({}, 100)).toBeNull();
    expect(checkBodyHeaders({ 'content-length': '0', 'content-type': 'text/plain' }, 100)).toBeNull();
    expect(checkBodyHeaders(json, 100)).toBeUndefined();
    expect(checkBodyHeaders({ 'content-type': 'application/vnd.api+json; charset=utf-8', 'transfer-encoding': 'chunked' }, 100)).toBeUndefined();
    expect(checkBodyHeaders({ ...json, 'content-encoding': 'identity' }, 100)).toBeUndefined();
  });

  it('refuses other types (415), compressed bodies (415) and declared lengths over the limit (413) before reading', () => {
    expect(checkBodyHeaders({ 'content-length': '10', 'content-type': 'text/plain' }, 100)?.status).toBe(415);
    expect(checkBodyHeaders({ 'content-length': '10' }, 100)?.status).toBe(415);
    expect(checkBodyHeaders({ ...json, 'content-encoding': 'gzip' }, 100)?.message).toMatch(/uncompressed/);
    expect(checkBodyHeaders({ ...json, 'content-length': '101' }, 100)?.status).toBe(413);
  });
});

describe('rate-limit headers', () => {
  const decision = (remaining: number, limit: number, allowed = true): RateDecision => ({ allowed, limit, remaining, reset: Math.floor(Date.now() / 1000) + 30 });

  it('reports the budget with the smallest share left, and a refusal over any that allowed', () => {
    const ip = decision(500, 1000);
    const token = decision(10, 100);
    expect(tighter(undefined, ip)).toBe(ip);
    expect(tighter(ip, token)).toBe(token);
    expect(tighter(token, ip)).toBe(token);
    const drained = decision(0, 1000);
    const refused = decision(0, 100, false);
    expect(tighter(drained, refused)).toBe(refused);
  });

  it('adds Retry-After, at least one second, only to a refusal', () => {
    expect(rateHeaders(decision(3, 10))).toEqual({ 'RateLimit-Limit': 10, 'RateLimit-Remaining': 3, 'RateLimit-Reset': expect.any(Number) });
    const refused = rateHeaders(decision(0, 10, false));
    expect(refused['Retry-After']).toBeGreaterThanOrEqual(29);
    expect(rateHeaders({ allowed: false, limit: 1, remaining: 0, reset: 0 })['Retry-After']).toBe(1);
  });
});
