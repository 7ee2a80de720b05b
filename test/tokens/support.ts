import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { TestApp, TestUser } from '../support/harness';

type Jose = typeof import('jose', { with: { 'resolution-mode': 'import' } });
export const loadJose = (): Promise<Jose> => import('jose');

export async function createProject(user: TestUser, name = `Project ${Math.random().toString(36).slice(2, 8)}`): Promise<string> {
  const res = await user.request('POST', '/api/projects', { name });
  if (res.status !== 201) throw new Error(`project create failed: ${res.status} ${res.text}`);
  return res.body.id as string;
}

export async function addMember(owner: TestUser, projectId: string, userId: string, role: string): Promise<void> {
  const res = await owner.request('POST', `/api/projects/${projectId}/members`, { userId, role });
  if (res.status !== 201 && res.status !== 200) throw new Error(`member add failed: ${res.status} ${res.text}`);
}

export async function createOpaque(user: TestUser, projectId: string, permissions: Record<string, boolean>, extra: Record<string, unknown> = {}) {
  const res = await user.request('POST', `/api/projects/${projectId}/tokens`, { name: 'opaque', permissions, ...extra });
  if (res.status !== 201) throw new Error(`token create failed: ${res.status} ${res.text}`);
  return res.body as { token: { id: string }; value: string };
}

export async function createJwt(user: TestUser, projectId: string, scopes: string[]) {
  const res = await user.request('POST', `/api/projects/${projectId}/tokens`, { name: 'jwt', scopes });
  if (res.status !== 201) throw new Error(`token create failed: ${res.status} ${res.text}`);
  return res.body as { token: { id: string }; accessToken: string; refreshToken: string; accessTokenExpiresAt: string; refreshTokenExpiresAt: string };
}

export async function createPersonalToken(user: TestUser, body: Record<string, unknown>) {
  const res = await user.request('POST', '/api/users/me/personal-tokens', { name: 'pat', ...body });
  if (res.status !== 201) throw new Error(`personal token create failed: ${res.status} ${res.text}`);
  return res.body as { token: { id: string }; value: string };
}

export function decodeJwtPart(token: string, part: 0 | 1): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[part], 'base64url').toString('utf8'));
}

/** The signing key the app generated under its DATA_DIR (embedded/test profile). */
export function appSigningKey(app: TestApp): { pem: string; key: KeyObject } {
  const pem = fs.readFileSync(path.join(app.platform.config.dataDir, 'keys', 'jwt-ed25519.pem'), 'utf8');
  return { pem, key: createPrivateKey(pem) };
}

export function foreignEd25519Key(): KeyObject {
  return generateKeyPairSync('ed25519').privateKey;
}
