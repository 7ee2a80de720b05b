import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestApp, TestUser } from '../support/harness';

/**
 * A webhook receiver on 127.0.0.1 that verifies every delivery the way a user's endpoint
 * would: X-Svc-Signature over the raw body and the Standard Webhooks signature, both compared
 * in constant time, with its own HMAC code (not the service's).
 */

export interface ReceivedDelivery {
  path: string;
  headers: http.IncomingHttpHeaders;
  rawBody: string;
  body: any;
  receivedAt: number;
  /** Did X-Svc-Signature match HMAC-SHA256(secret, raw body)? */
  svcSignatureValid: boolean;
  /** Did webhook-signature match v1 HMAC over `${id}.${timestamp}.${body}`? */
  standardSignatureValid: boolean;
}

export type Behaviour = (attempt: number, req: http.IncomingMessage) => { status: number; delayMs?: number; body?: string; headers?: Record<string, string> };

export interface Receiver {
  url(path?: string): string;
  /** Sets the secret used to verify requests on a path. */
  expectSecret(path: string, secret: string): void;
  /** How a path answers its n-th request (1-based); default 200. */
  behave(path: string, behaviour: Behaviour): void;
  received(path: string): ReceivedDelivery[];
  close(): Promise<void>;
}

function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function standardWebhooksKey(secret: string): Buffer {
  return secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret, 'utf8');
}

export function verifySvc(secret: string, raw: string, header: string | undefined): boolean {
  if (!header) return false;
  return constantTimeEqual(`sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`, header);
}

export function verifyStandard(secret: string, raw: string, headers: http.IncomingHttpHeaders): boolean {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sig = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof ts !== 'string' || typeof sig !== 'string') return false;
  const expected = `v1,${createHmac('sha256', standardWebhooksKey(secret)).update(`${id}.${ts}.${raw}`).digest('base64')}`;
  return sig.split(' ').some((candidate) => constantTimeEqual(candidate, expected));
}

export async function startReceiver(): Promise<Receiver> {
  const secrets = new Map<string, string>();
  const behaviours = new Map<string, Behaviour>();
  const log = new Map<string, ReceivedDelivery[]>();
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const secret = secrets.get(path) ?? '';
      let body: unknown;
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = rawBody;
      }
      const entries = log.get(path) ?? [];
      entries.push({
        path,
        headers: req.headers,
        rawBody,
        body,
        receivedAt: Date.now(),
        svcSignatureValid: verifySvc(secret, rawBody, req.headers['x-svc-signature'] as string | undefined),
        standardSignatureValid: verifyStandard(secret, rawBody, req.headers),
      });
      log.set(path, entries);
      const behaviour: Behaviour = behaviours.get(path) ?? (() => ({ status: 200 }));
      const answer = behaviour(entries.length, req);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
        res.end(answer.body ?? `answer ${answer.status}`);
      };
      if (answer.delayMs) {
        const t = setTimeout(() => {
          timers.delete(t);
          send();
        }, answer.delayMs);
        timers.add(t);
      } else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path = '/') => `http://127.0.0.1:${port}${path}`,
    expectSecret: (path, secret) => secrets.set(path, secret),
    behave: (path, behaviour) => behaviours.set(path, behaviour),
    received: (path) => log.get(path) ?? [],
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const uniquePath = (label: string) => `/${label}-${randomBytes(4).toString('hex')}`;

export function expectStatus(res: { status: number; text: string }, status: number, what: string) {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${res.text}`);
}

export interface Project {
  projectId: string;
  orgId: string;
  serviceId: string;
  owner: TestUser;
  admin: TestUser;
  member: TestUser;
  viewer: TestUser;
}

/** A project with one service and one user per role, built through the public API. */
export async function createProject(app: TestApp): Promise<Project> {
  const owner = await app.signup({ verified: true });
  const project = await owner.request('POST', '/api/projects', { name: `Hooks ${randomBytes(3).toString('hex')}` });
  expectStatus(project, 201, 'create project');
  const service = await owner.request('POST', '/api/services', { projectId: project.body.id, name: 'checkout' });
  expectStatus(service, 201, 'create service');
  const users: Record<string, TestUser> = {};
  for (const role of ['admin', 'member', 'viewer'] as const) {
    const user = await app.signup({ verified: true });
    expectStatus(await owner.request('POST', `/api/projects/${project.body.id}/members`, { userId: user.id, role }), 201, `add ${role}`);
    users[role] = user;
  }
  return { projectId: project.body.id, orgId: project.body.orgId, serviceId: service.body.id, owner, admin: users.admin, member: users.member, viewer: users.viewer };
}

export async function createFlag(user: TestUser, serviceId: string, key: string, environment = 'production') {
  const res = await user.request('POST', '/api/flags', { key, name: key, type: 'boolean', serviceId, environment, defaultValue: false });
  expectStatus(res, 201, 'create flag');
  return res.body;
}

export async function createWebhook(user: TestUser, body: Record<string, unknown>) {
  const res = await user.request('POST', '/api/webhooks', body);
  expectStatus(res, 201, 'create webhook');
  return res.body as { id: string; secret: string; url: string; events: string[]; active: boolean };
}

export async function opaqueToken(owner: TestUser, projectId: string, permissions: Record<string, boolean>): Promise<string> {
  const res = await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: 'opaque', permissions });
  expectStatus(res, 201, 'create opaque token');
  return res.body.value;
}

export async function jwtToken(owner: TestUser, projectId: string, scopes: string[]): Promise<string> {
  const res = await owner.request('POST', `/api/projects/${projectId}/tokens`, { name: 'jwt', scopes });
  expectStatus(res, 201, 'create jwt token');
  return res.body.accessToken;
}

export async function personalToken(user: TestUser, tier: 'read' | 'write' | 'admin'): Promise<string> {
  const res = await user.request('POST', '/api/users/me/personal-tokens', { name: `pat-${tier}`, tier });
  expectStatus(res, 201, 'create personal token');
  return res.body.value;
}

export const qs = (params: Record<string, string | number | boolean | undefined>) =>
  '?' +
  Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
