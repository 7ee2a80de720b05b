import http, { type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Principal } from '../../api/auth/principal';
import { ANONYMOUS } from '../../api/auth/principal';
import { createLeanHandler, type LeanRoute } from '../../api/features/evaluation/lean';
import { LocalRateLimiter } from '../../api/features/evaluation/local-rate-limiter';
import { ofrepEvaluateRoutes } from '../../api/features/evaluation/ofrep';
import { restEvaluateRoute } from '../../api/features/evaluation/rest';
import type { EvaluationService } from '../../api/features/evaluation/service';
import { HttpError, unauthorized } from '../../api/http/errors';
import { BODY_LIMITS } from '../../api/http/route';
import { createCache } from '../../api/infra/cache';
import { createLogger } from '../../api/infra/logger';
import { Metrics } from '../../api/lib/metrics/metrics';

/**
 * The lean edge executes what its routes declare: the real route declarations, each changed in
 * one declared field, served by createLeanHandler. The evaluation service answers 418 the moment
 * an adapter reaches it, so 418 means the edge admitted the request and read its body.
 */

const REACHED = 418;
const reached = () => {
  throw new HttpError(REACHED, 'reached the adapter');
};
const evaluation = { grantNow: reached, grant: reached } as unknown as EvaluationService;

const PROJECT_TOKEN: Principal = { type: 'project_api_token', tokenId: 't1', tokenType: 'opaque', projectId: 'p1', scopes: ['read'], createdBy: null };
const SESSION = { type: 'session', sessionId: 's1', csrfToken: 'csrf-1', user: { id: 'u1' } } as unknown as Principal;
const authenticator = {
  resolveBearer: (token: string): Principal => {
    if (token === 'good') return PROJECT_TOKEN;
    throw unauthorized('Invalid, expired or revoked token');
  },
  authenticate: async (req: IncomingMessage): Promise<Principal> => (req.headers.cookie === 'session=s1' ? SESSION : ANONYMOUS),
};

let server: http.Server | undefined;
let base = '';

async function serve(routes: LeanRoute[]): Promise<void> {
  const limiter = new LocalRateLimiter({ cache: createCache(undefined), windowSeconds: 60, syncIntervalMs: 60_000, logger: createLogger('silent') });
  const front = createLeanHandler({ authenticator, limiter, perIpLimit: 1e9, perTokenLimit: 1e9, trustProxy: 0, logger: createLogger('silent'), metrics: new Metrics({ version: 'test', commit: 'test' }).http }, routes);
  server = http.createServer((req, res) => {
    if (!front(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function stop(): Promise<void> {
  const running = server;
  server = undefined;
  if (running !== undefined) await new Promise((resolve) => running.close(resolve));
}

afterEach(stop);

const restEvaluate = () => restEvaluateRoute(evaluation);
const [ofrepSingle] = ofrepEvaluateRoutes({ evaluation, channels: undefined as never, waiters: undefined as never, publicDataUrl: undefined });

async function post(path: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: res.status, body: (await res.json()) as { message: string } & Record<string, unknown> };
}

/** A body sent without Content-Length, so the limit is enforced while reading rather than from the headers. */
function postChunked(path: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const evaluateBody = JSON.stringify({ flagKey: 'f', serviceId: 's', context: { targetingKey: 'x'.repeat(200) } });

describe('the lean edge executes the declared policy', () => {
  it('reads a body up to the declared limit and refuses one over a smaller declared limit with 413', async () => {
    expect(restEvaluate().bodyLimit).toBe(BODY_LIMITS.evaluation);
    await serve([restEvaluate()]);
    expect((await post('/api/flags/evaluate', evaluateBody)).status).toBe(REACHED);
    expect(await postChunked('/api/flags/evaluate', evaluateBody)).toBe(REACHED);
    await stop();

    await serve([{ ...restEvaluate(), bodyLimit: 100 }]);
    const declared = await post('/api/flags/evaluate', evaluateBody);
    expect(declared.status).toBe(413);
    expect(declared.body.message).toBe('Request body exceeds the 100 byte limit for this route');
    expect(await postChunked('/api/flags/evaluate', evaluateBody)).toBe(413);
  });

  it('applies the declared anonymous body limit to anonymous callers only', async () => {
    await serve([{ ...restEvaluate(), anonymousBodyLimit: 100 }]);
    expect((await post('/api/flags/evaluate', evaluateBody)).status).toBe(413);
    expect((await post('/api/flags/evaluate', evaluateBody, { authorization: 'Bearer good' })).status).toBe(REACHED);
  });

  it('answers 401 to an anonymous caller when the route is declared for authenticated callers', async () => {
    await serve([{ ...restEvaluate(), auth: 'authenticated' }]);
    const anonymous = await post('/api/flags/evaluate', evaluateBody);
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.message).toBe('Authentication required');
    expect((await post('/api/flags/evaluate', evaluateBody, { authorization: 'Bearer good' })).status).toBe(REACHED);
  });

  it('checks CSRF for a cookie session unless the route is declared exempt', async () => {
    expect(restEvaluate().csrfExempt).toBe(true);
    await serve([restEvaluate(), { ...ofrepSingle, path: '/api/strict/:key', csrfExempt: false }]);
    expect((await post('/api/flags/evaluate', evaluateBody, { cookie: 'session=s1' })).status).toBe(REACHED);
    const strict = await post('/api/strict/f', '{}', { cookie: 'session=s1', 'x-service-id': 's' });
    expect(strict.status).toBe(403);
    expect(strict.body.message).toMatch(/CSRF/);
    // The route's own protocol answers the refusal: OFREP's error body, with the flag key.
    expect(strict.body).toMatchObject({ key: 'f', errorCode: 'GENERAL' });
    expect((await post('/api/strict/f', '{}', { cookie: 'session=s1', 'x-csrf-token': 'csrf-1', 'x-service-id': 's' })).status).toBe(REACHED);
  });

  it('refuses at startup a route whose access rule it cannot execute', () => {
    const route: LeanRoute = { ...restEvaluate(), access: { capability: 'flags:read', project: () => 'p1' } };
    expect(() => createLeanHandler({} as never, [route])).toThrow('the lean edge serves only access rules decided per flag');
  });
});
