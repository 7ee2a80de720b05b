import { createHmac } from 'node:crypto';
import { classifyStatus } from '../../activities/delivery';
import { signedHeaders, standardWebhooksSecret, standardWebhooksSignature, svcSignature, verifySvcSignature } from '../../api/features/webhooks/signing';

/** Signature code and the retry classification, as pure functions. */

describe('signatures', () => {
  it('matches the published Standard Webhooks test vector', () => {
    // The reference vector used by the Standard Webhooks / Svix libraries.
    expect(standardWebhooksSignature('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')).toBe(
      'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    );
  });

  it('keys a plain secret with its UTF-8 bytes, which whsec_+base64 of it reproduces', () => {
    const plain = standardWebhooksSignature('my secret', 'id-1', 1700000000, '{}');
    expect(standardWebhooksSignature(standardWebhooksSecret('my secret'), 'id-1', 1700000000, '{}')).toBe(plain);
    expect(standardWebhooksSecret('my secret')).toBe(`whsec_${Buffer.from('my secret').toString('base64')}`);
    expect(standardWebhooksSecret('whsec_abc=')).toBe('whsec_abc=');
  });

  it('computes X-Svc-Signature as sha256=<hex HMAC of the raw body> keyed by the secret string', () => {
    const body = '{"event":"flag.toggled","timestamp":"2026-01-01T00:00:00.000Z","data":{}}';
    const expected = createHmac('sha256', 'whsec_abc').update(body).digest('hex');
    expect(svcSignature('whsec_abc', body)).toBe(`sha256=${expected}`);
    expect(verifySvcSignature('whsec_abc', body, `sha256=${expected}`)).toBe(true);
    expect(verifySvcSignature('whsec_abc', `${body} `, `sha256=${expected}`)).toBe(false);
    expect(verifySvcSignature('whsec_abc', body, 'sha256=00')).toBe(false);
    expect(verifySvcSignature('whsec_abc', body, undefined)).toBe(false);
  });

  it('builds the headers of one attempt: stable id, the attempt timestamp, both signatures', () => {
    const h = signedHeaders('s3cret', 'whd:w:e', '{"a":1}', 1700000123);
    expect(h).toEqual({
      'x-svc-signature': svcSignature('s3cret', '{"a":1}'),
      'webhook-id': 'whd:w:e',
      'webhook-timestamp': '1700000123',
      'webhook-signature': standardWebhooksSignature('s3cret', 'whd:w:e', 1700000123, '{"a":1}'),
    });
  });
});

describe('classifyStatus', () => {
  it.each([
    [200, 'delivered'],
    [201, 'delivered'],
    [204, 'delivered'],
    [500, 'retry'],
    [502, 'retry'],
    [503, 'retry'],
    [429, 'retry'],
    [400, 'failed'],
    [401, 'failed'],
    [404, 'failed'],
    [410, 'failed'],
    [301, 'failed'],
    [302, 'failed'],
    [307, 'failed'],
  ])('HTTP %i -> %s', (status, outcome) => {
    expect(classifyStatus(status).outcome).toBe(outcome);
  });
});
