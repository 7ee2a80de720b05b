import { errorHandler } from '../../api/http/app';
import { HttpError } from '../../api/http/errors';

function run(error: unknown) {
  const out: { status?: number; body?: any } = {};
  const res = {
    headersSent: false,
    status(code: number) {
      out.status = code;
      return this;
    },
    json(body: unknown) {
      out.body = body;
      return this;
    },
  };
  const logged: unknown[] = [];
  const req = { log: { error: (o: unknown) => logged.push(o) } };
  errorHandler()(error, req as never, res as never, () => undefined);
  return { ...out, logged };
}

describe('error handler', () => {
  it('answers unexpected errors with a bare 500 and logs them, never with a stack trace', () => {
    const error = new Error('connection refused at db.internal:5432');
    const { status, body, logged } = run(error);
    expect(status).toBe(500);
    expect(body).toEqual({ error: 'Internal Server Error', message: 'Internal server error' });
    expect(JSON.stringify(body)).not.toContain('db.internal');
    expect(logged).toHaveLength(1);
  });

  it('keeps typed errors with their status and extra fields', () => {
    const { status, body } = run(new HttpError(403, 'Verify your email address first', { code: 'EMAIL_NOT_VERIFIED' }, 'Verify your email address first'));
    expect(status).toBe(403);
    expect(body).toEqual({ error: 'Verify your email address first', message: 'Verify your email address first', code: 'EMAIL_NOT_VERIFIED' });
  });

  it('passes client errors from body parsing through with their status', () => {
    const { status, body } = run(Object.assign(new Error('request entity too large'), { status: 413, expose: true }));
    expect(status).toBe(413);
    expect(body.error).toBe('Payload Too Large');
  });
});
