import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { JwtCodec, JwtConfigError, type JwtKeyOptions } from '../../api/auth/jwt';
import { parseConfig } from '../../api/config';
import { createLogger } from '../../api/infra/logger';

/** Key management for project JWTs: configuration, generation under DATA_DIR, rotation by kid. */
const logger = createLogger('silent');
let dataDir: string;
beforeEach(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'jwt-keys-'));
});
afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

const options = (extra: Partial<JwtKeyOptions> = {}): JwtKeyOptions => ({ dataDir, issuer: 'flagship', audience: 'flagship-api', ...extra });
const ed25519Pem = () => generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
const now = () => Math.floor(Date.now() / 1000);
const claims = (type: 'access' | 'refresh' = 'access') => ({ jti: 'jti_1', projectId: 'prj_1', tokenId: 'tok_1', scopes: ['read' as const], type, iat: now(), exp: now() + 60 });
const kidOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString()).kid as string;

describe('JWT signing keys', () => {
  it('generates one key under DATA_DIR (mode 0600) and reuses it after a restart', async () => {
    const first = await JwtCodec.create(options(), logger);
    const file = path.join(dataDir, 'keys', 'jwt-ed25519.pem');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const token = await first.sign(claims());
    const second = await JwtCodec.create(options(), logger);
    expect(second.keyId).toBe(first.keyId);
    expect(await second.verify(token, 'access')).toMatchObject({ tokenId: 'tok_1', type: 'access' });
  });

  it('uses a configured key (with \\n escapes) and names it by thumbprint or JWT_KEY_ID', async () => {
    const pem = ed25519Pem();
    const byThumbprint = await JwtCodec.create(options({ privateKeyPem: pem.replace(/\n/g, '\\n') }), logger);
    expect(byThumbprint.keyId).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(fs.existsSync(path.join(dataDir, 'keys'))).toBe(false);
    const named = await JwtCodec.create(options({ privateKeyPem: pem, keyId: '2026-01' }), logger);
    const token = await named.sign(claims());
    expect(kidOf(token)).toBe('2026-01');
    expect(await named.verify(token, 'access')).not.toBeNull();
    expect(await named.verify(token, 'refresh')).toBeNull();
  });

  it('rotates: tokens of a retired key listed in JWT_PUBLIC_KEYS still verify, others do not', async () => {
    const oldCodec = await JwtCodec.create(options({ privateKeyPem: ed25519Pem(), keyId: 'old' }), logger);
    const oldToken = await oldCodec.sign(claims());
    const retired = oldCodec.publicJwks().keys[0];

    const withRetired = await JwtCodec.create(options({ privateKeyPem: ed25519Pem(), keyId: 'new', publicKeysJson: JSON.stringify({ keys: [retired] }) }), logger);
    expect(await withRetired.verify(oldToken, 'access')).toMatchObject({ jti: 'jti_1' });
    expect(kidOf(await withRetired.sign(claims()))).toBe('new');
    expect(withRetired.publicJwks().keys.map((k) => k.kid).sort()).toEqual(['new', 'old']);

    const withoutRetired = await JwtCodec.create(options({ privateKeyPem: ed25519Pem(), keyId: 'new' }), logger);
    expect(await withoutRetired.verify(oldToken, 'access')).toBeNull();
  });

  it('refuses unusable key configuration at start', async () => {
    await expect(JwtCodec.create(options({ privateKeyPem: 'not a key' }), logger)).rejects.toThrow(JwtConfigError);
    const ecPem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    await expect(JwtCodec.create(options({ privateKeyPem: ecPem }), logger)).rejects.toThrow(/Ed25519/);
    await expect(JwtCodec.create(options({ publicKeysJson: '{nope' }), logger)).rejects.toThrow(/JSON Web Key Set/);
    await expect(JwtCodec.create(options({ publicKeysJson: JSON.stringify({ keys: [{ kty: 'RSA', n: 'x', e: 'AQAB', kid: 'r' }] }) }), logger)).rejects.toThrow(/Ed25519/);
    const pem = ed25519Pem();
    const codec = await JwtCodec.create(options({ privateKeyPem: pem, keyId: 'same' }), logger);
    const dup = JSON.stringify({ keys: [codec.publicJwks().keys[0]] });
    await expect(JwtCodec.create(options({ privateKeyPem: ed25519Pem(), keyId: 'same', publicKeysJson: dup }), logger)).rejects.toThrow(/reuses/);
  });

  it('requires JWT_PRIVATE_KEY in production, so replicas share one key', () => {
    const production = {
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://db/x',
      REDIS_URL: 'redis://r',
      CLICKHOUSE_URL: 'http://ch:8123',
      TEMPORAL_ADDRESS: 'temporal:7233',
    };
    expect(() => parseConfig(production)).toThrow(/JWT_PRIVATE_KEY: required when NODE_ENV=production/);
    expect(parseConfig({ ...production, JWT_PRIVATE_KEY: ed25519Pem() }).JWT_PRIVATE_KEY).toContain('PRIVATE KEY');
  });

  it('verifies issuer and audience exactly', async () => {
    const pem = ed25519Pem();
    const a = await JwtCodec.create(options({ privateKeyPem: pem }), logger);
    const token = await a.sign(claims());
    const otherAudience = await JwtCodec.create(options({ privateKeyPem: pem, audience: 'other' }), logger);
    const otherIssuer = await JwtCodec.create(options({ privateKeyPem: pem, issuer: 'other' }), logger);
    expect(await a.verify(token, 'access')).not.toBeNull();
    expect(await otherAudience.verify(token, 'access')).toBeNull();
    expect(await otherIssuer.verify(token, 'access')).toBeNull();
  });
});

describe('verified-token memo', () => {
  it('remembers a verified token but still refuses it once expired, and keeps the type check', async () => {
    const codec = await JwtCodec.create(options({ privateKeyPem: ed25519Pem() }), logger);
    // Seconds of margin so a loaded machine still verifies before `exp`; then wait until it has passed.
    const exp = now() + 5;
    const token = await codec.sign({ ...claims(), exp });
    expect(await codec.verify(token, 'access')).not.toBeNull();
    expect(await codec.verify(token, 'access')).not.toBeNull();
    expect(await codec.verify(token, 'refresh')).toBeNull();
    while (Date.now() < exp * 1000 + 50) await new Promise((r) => setTimeout(r, exp * 1000 + 50 - Date.now()));
    expect(await codec.verify(token, 'access')).toBeNull();
    const forged = `${token.slice(0, -4)}AAAA`;
    expect(await codec.verify(forged, 'access')).toBeNull();
  });
});
