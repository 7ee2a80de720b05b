import { HttpError, badRequest, malformedJson, personalTokenRefused, retryLater, validationFailed } from '../../api/http/errors';

/** Issue 10 point 3: the HTTP pieces Express and the lean path share. */
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
