import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { Logger } from '../infra/logger';
import type { TokenScope } from './principal';

/**
 * Project JWTs (docs/api-reference.md#project-api-tokens). The algorithm is pinned to EdDSA over
 * Ed25519: asymmetric, so a verifier never holds a signing secret, and with no parameters to get
 * wrong. Every token carries the `kid` of its signing key so keys can rotate: the current key
 * signs, retired keys (JWT_PUBLIC_KEYS) still verify until their tokens run out.
 */
export const JWT_ALGORITHM = 'EdDSA';
export const ACCESS_TOKEN_TTL_SECONDS = 24 * 3600;
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;

type Jose = typeof import('jose', { with: { 'resolution-mode': 'import' } });
// jose is ESM-only; a dynamic import loads it from our CommonJS build.
let josePromise: Promise<Jose> | undefined;
const loadJose = () => (josePromise ??= import('jose'));

export const TOKEN_SCOPES = ['read', 'write', 'delete', 'manage_settings', 'manage_members'] as const satisfies readonly TokenScope[];

/** Exactly the claims docs/api-reference.md#project-api-tokens lists. */
export interface ProjectJwtClaims {
  sub: string;
  iss: string;
  aud: string;
  iat: number;
  exp: number;
  jti: string;
  projectId: string;
  tokenId: string;
  scopes: TokenScope[];
  type: 'access' | 'refresh';
}

const ClaimsSchema = z.object({
  sub: z.string().min(1),
  iss: z.string(),
  aud: z.string(),
  iat: z.number().int(),
  exp: z.number().int(),
  jti: z.string().min(1),
  projectId: z.string().min(1),
  tokenId: z.string().min(1),
  scopes: z.array(z.enum(TOKEN_SCOPES)),
  type: z.enum(['access', 'refresh']),
});

export interface JwtKeyOptions {
  privateKeyPem?: string;
  keyId?: string;
  publicKeysJson?: string;
  /** Where a generated key is kept when none is configured (embedded and test profiles). */
  dataDir: string;
  issuer: string;
  audience: string;
}

export class JwtConfigError extends Error {}

/** The shape of a JWK we accept as a retired verification key. */
const PublicJwk = z.object({ kty: z.literal('OKP'), crv: z.literal('Ed25519'), x: z.string().min(1), kid: z.string().min(1) }).passthrough();

/** Verified tokens remembered per process (signature checks cost ~0.2-0.5 ms each on small cores). */
const VERIFIED_MEMO_SIZE = 10_000;

export class JwtCodec {
  /** sha256(token) -> its verified claims; a signature never changes, expiry is rechecked on every hit. */
  private readonly verified = new Map<string, ProjectJwtClaims>();

  private constructor(
    private readonly jose: Jose,
    readonly keyId: string,
    private readonly signingKey: KeyObject,
    private readonly verificationKeys: ReadonlyMap<string, KeyObject>,
    readonly issuer: string,
    readonly audience: string,
  ) {}

  static async create(opts: JwtKeyOptions, logger: Logger): Promise<JwtCodec> {
    const jose = await loadJose();
    const pem = opts.privateKeyPem ? opts.privateKeyPem.replace(/\\n/g, '\n') : readOrCreateKeyFile(opts.dataDir, logger);
    let signingKey: KeyObject;
    try {
      signingKey = createPrivateKey(pem);
    } catch {
      throw new JwtConfigError('JWT_PRIVATE_KEY is not a readable PKCS#8 PEM private key');
    }
    if (signingKey.asymmetricKeyType !== 'ed25519') throw new JwtConfigError('JWT_PRIVATE_KEY must be an Ed25519 key (EdDSA is the pinned algorithm)');
    const publicKey = createPublicKey(signingKey);
    const keyId = opts.keyId ?? (await jose.calculateJwkThumbprint(publicKey.export({ format: 'jwk' }) as never, 'sha256'));

    const verificationKeys = new Map<string, KeyObject>([[keyId, publicKey]]);
    for (const jwk of parseRetiredKeys(opts.publicKeysJson)) {
      if (jwk.kid === keyId) throw new JwtConfigError(`JWT_PUBLIC_KEYS reuses the signing key id "${keyId}"`);
      verificationKeys.set(jwk.kid, createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, format: 'jwk' }));
    }
    return new JwtCodec(jose, keyId, signingKey, verificationKeys, opts.issuer, opts.audience);
  }

  /** The public half of every key that verifies tokens, for offline verifiers. */
  publicJwks(): { keys: Record<string, unknown>[] } {
    return {
      keys: [...this.verificationKeys].map(([kid, key]) => ({ ...(key.export({ format: 'jwk' }) as object), kid, alg: JWT_ALGORITHM, use: 'sig' })),
    };
  }

  async sign(c: { jti: string; projectId: string; tokenId: string; scopes: TokenScope[]; type: 'access' | 'refresh'; iat: number; exp: number }): Promise<string> {
    return new this.jose.SignJWT({ projectId: c.projectId, tokenId: c.tokenId, scopes: c.scopes, type: c.type })
      .setProtectedHeader({ alg: JWT_ALGORITHM, kid: this.keyId, typ: 'JWT' })
      .setSubject(c.tokenId)
      .setIssuer(this.issuer)
      .setAudience(this.audience)
      .setIssuedAt(c.iat)
      .setExpirationTime(c.exp)
      .setJti(c.jti)
      .sign(this.signingKey);
  }

  /**
   * Signs a short-lived token of another kind (OFREP event-stream channels) with the current key.
   * Its own audience keeps the kinds apart: it never verifies as a project JWT, nor one as it.
   */
  async signOther(audience: string, claims: Record<string, unknown>, iat: number, exp: number): Promise<string> {
    if (audience === this.audience) throw new Error('another kind of token needs its own audience');
    return new this.jose.SignJWT(claims)
      .setProtectedHeader({ alg: JWT_ALGORITHM, kid: this.keyId, typ: 'JWT' })
      .setIssuer(this.issuer)
      .setAudience(audience)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .sign(this.signingKey);
  }

  /** The claims of a token signOther made for `audience`, or null (another key, issuer or audience, expired, malformed). */
  async verifyOther(token: string, audience: string): Promise<Record<string, unknown> | null> {
    if (audience === this.audience) return null;
    try {
      const { payload } = await this.jose.jwtVerify(token, (header) => this.keyOf(header.kid), {
        algorithms: [JWT_ALGORITHM],
        issuer: this.issuer,
        audience,
        requiredClaims: ['iat', 'exp'],
      });
      return payload;
    } catch {
      return null;
    }
  }

  private keyOf(kid: string | undefined): KeyObject {
    const key = kid ? this.verificationKeys.get(kid) : undefined;
    if (!key) throw new Error('unknown key id');
    return key;
  }

  /**
   * The verified claims, or null for anything not signed by one of our keys with the pinned
   * algorithm, for another issuer or audience, expired, malformed, or of the other type.
   */
  async verify(token: string, expectedType: 'access' | 'refresh'): Promise<ProjectJwtClaims | null> {
    const memoKey = createHash('sha256').update(token).digest('base64url');
    const memo = this.verified.get(memoKey);
    if (memo) {
      if (memo.exp > Date.now() / 1000) return memo.type === expectedType ? memo : null;
      this.verified.delete(memoKey);
      return null;
    }
    const claims = await this.verifySignature(token);
    if (!claims) return null;
    if (this.verified.size >= VERIFIED_MEMO_SIZE) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(memoKey, claims);
    return claims.type === expectedType ? claims : null;
  }

  private async verifySignature(token: string): Promise<ProjectJwtClaims | null> {
    try {
      const { payload } = await this.jose.jwtVerify(
        token,
        (header) => this.keyOf(header.kid),
        { algorithms: [JWT_ALGORITHM], issuer: this.issuer, audience: this.audience, requiredClaims: ['sub', 'iat', 'exp', 'jti'] },
      );
      const claims = ClaimsSchema.safeParse(payload);
      if (!claims.success || claims.data.sub !== claims.data.tokenId) return null;
      return claims.data;
    } catch {
      return null;
    }
  }
}

/** Does this look like a compact JWS (three base64url parts)? Cheap routing for the authenticator. */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

function parseRetiredKeys(json: string | undefined): z.infer<typeof PublicJwk>[] {
  if (!json) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new JwtConfigError('JWT_PUBLIC_KEYS must be a JSON Web Key Set ({"keys":[…]})');
  }
  const set = z.object({ keys: z.array(PublicJwk) }).safeParse(parsed);
  if (!set.success) throw new JwtConfigError('JWT_PUBLIC_KEYS must hold Ed25519 public JWKs (kty OKP, crv Ed25519, x, kid)');
  return set.data.keys;
}

/**
 * Embedded profile: the signing key is generated once and kept under DATA_DIR (mode 0600),
 * so tokens survive restarts. Exclusive create makes two processes starting together agree.
 */
function readOrCreateKeyFile(dataDir: string, logger: Logger): string {
  const file = path.join(dataDir, 'keys', 'jwt-ed25519.pem');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8');
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  try {
    fs.writeFileSync(file, pem, { flag: 'wx', mode: 0o600 });
    logger.info({ file }, 'generated the JWT signing key');
    return pem;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8');
    throw error;
  }
}
