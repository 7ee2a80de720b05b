import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The two signatures every delivery carries:
 * - `X-Svc-Signature: sha256=<hex>`: HMAC-SHA256 of the raw body keyed with the secret's
 *   UTF-8 bytes (docs/api-reference.md#webhooks, exactly as specified).
 * - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`):
 *   HMAC-SHA256 of `${id}.${timestamp}.${body}`. Its key follows that spec: a `whsec_<base64>`
 *   secret is base64-decoded; any other secret is used as its UTF-8 bytes, so off-the-shelf
 *   verifiers work when given `whsec_` + base64(secret) (see `standardWebhooksSecret`).
 */

export function svcSignature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export function standardWebhooksKey(secret: string): Buffer {
  if (secret.startsWith('whsec_')) {
    const decoded = Buffer.from(secret.slice('whsec_'.length), 'base64');
    if (decoded.length > 0) return decoded;
  }
  return Buffer.from(secret, 'utf8');
}

/** The secret in the form Standard Webhooks libraries take. */
export function standardWebhooksSecret(secret: string): string {
  return secret.startsWith('whsec_') ? secret : `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;
}

export function standardWebhooksSignature(secret: string, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', standardWebhooksKey(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** Headers of one signed attempt. The id stays the same across retries; the timestamp is the attempt's. */
export function signedHeaders(secret: string, deliveryId: string, body: string, nowSeconds: number): Record<string, string> {
  return {
    'x-svc-signature': svcSignature(secret, body),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(nowSeconds),
    'webhook-signature': standardWebhooksSignature(secret, deliveryId, nowSeconds, body),
  };
}

/** Receiver-side check of X-Svc-Signature in constant time (used by tests and documented for users). */
export function verifySvcSignature(secret: string, body: string, header: string | undefined): boolean {
  if (!header) return false;
  const expected = Buffer.from(svcSignature(secret, body));
  const given = Buffer.from(header);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
