import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import { createClient, type Client, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { Service as EvaluationV1 } from '../../api/gen/flagd/evaluation/v1/evaluation_pb';
import { Service as EvaluationV2 } from '../../api/gen/flagd/evaluation/v2/evaluation_pb';
import { FlagSyncService } from '../../api/gen/flagd/sync/v1/sync_pb';
import type { TestApp } from '../support/harness';
import type { DataPlaneFixture } from '../data-plane/support';

/** A bound project API token (docs/local-evaluation.md#credentials) of the fixture's service. */
export async function boundToken(fx: DataPlaneFixture, opts: { environment?: string; serviceId?: string; permissions?: Record<string, boolean> } = {}) {
  const res = await fx.owner.request('POST', `/api/projects/${fx.projectId}/tokens`, {
    name: `flagd-${randomBytes(3).toString('hex')}`,
    permissions: opts.permissions ?? { read: true },
    scope: { serviceId: opts.serviceId ?? fx.serviceId, environment: opts.environment ?? 'development' },
  });
  if (res.status !== 201) throw new Error(`bound token: ${res.status} ${res.text}`);
  return res.body as { token: { id: string }; value: string };
}

export type Protocol = 'grpc' | 'connect-http1' | 'connect-h2c';
export const PROTOCOLS: Protocol[] = ['grpc', 'connect-http1', 'connect-h2c'];

export function transport(baseUrl: string, protocol: Protocol): Transport {
  if (protocol === 'grpc') return createGrpcTransport({ baseUrl });
  return createConnectTransport({ baseUrl, httpVersion: protocol === 'connect-h2c' ? '2' : '1.1' });
}

export const evaluationV1 = (app: TestApp, protocol: Protocol): Client<typeof EvaluationV1> => createClient(EvaluationV1, transport(app.urls.flagd!, protocol));
export const evaluationV2 = (app: TestApp, protocol: Protocol): Client<typeof EvaluationV2> => createClient(EvaluationV2, transport(app.urls.flagd!, protocol));
export const syncClient = (app: TestApp, protocol: Protocol = 'grpc'): Client<typeof FlagSyncService> => createClient(FlagSyncService, transport(app.urls.flagdSync!, protocol));

/** Call options naming the flag set with the flagd-selector metadata. */
export const selector = (value: string) => ({ headers: { 'flagd-selector': value } });

/** The error a call failed with (undefined when it succeeded). */
export async function failure(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (error: unknown) => error,
  );
}

/**
 * Reads a server stream in the background: its messages as they come, and how it ended (the
 * error, or 'ok' when it ended without one, which flagd streams never should).
 */
export function follow<T>(stream: AsyncIterable<T>) {
  const messages: T[] = [];
  let ended: unknown;
  const done = (async () => {
    try {
      for await (const message of stream) messages.push(message);
      ended = 'ok';
    } catch (error) {
      ended = error;
    }
  })();
  return {
    messages,
    done,
    get ended() {
      return ended;
    },
  };
}

/** Connects over HTTP/2 and sends one PING: its round trip in ms (rejects when unanswered). */
export async function pingOnce(url: string, options: http2.SecureClientSessionOptions = {}): Promise<number> {
  const session = http2.connect(url, options);
  try {
    await new Promise<void>((resolve, reject) => {
      session.once('connect', () => resolve());
      session.once('error', reject);
    });
    return await new Promise<number>((resolve, reject) => session.ping((error, duration) => (error ? reject(error) : resolve(duration))));
  } finally {
    session.close();
  }
}
