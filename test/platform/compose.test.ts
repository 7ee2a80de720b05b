import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import { parse } from 'yaml';
import { CONFIG_VARIABLES, parseConfig } from '../../api/config';
import { projectPath } from '../../api/infra/paths';

// Interpolate ${VAR...} from an environment the way `docker compose` does, with a real key.
const operatorEnv: Record<string, string> = {
  JWT_PRIVATE_KEY: generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
};
// `${VAR:-default}` takes the default when the operator sets nothing; `${VAR}` and `${VAR:?why}` are required.
const text = fs.readFileSync(projectPath('docker-compose.yml'), 'utf8').replace(/\$\{([A-Z_]+)(?:(:-|:\?)([^}]*))?\}/g, (_m, name: string, kind?: string, fallback?: string) => {
  if (name in operatorEnv) return JSON.stringify(operatorEnv[name]);
  if (kind === ':-') return JSON.stringify(fallback ?? '');
  throw new Error(`compose file needs ${name} from the environment`);
});
const compose = parse(text, { merge: true });
const appServices = Object.entries<Record<string, any>>(compose.services).filter(([, s]) => s.image === 'flags-app:local');

describe('docker-compose.yml', () => {
  it('runs Postgres, Redis, ClickHouse, Temporal with its UI, and the four app processes', () => {
    const images = Object.values<Record<string, any>>(compose.services).map((s) => String(s.image));
    for (const image of ['postgres:', 'redis:', 'clickhouse/clickhouse-server:', 'temporalio/auto-setup:', 'temporalio/ui:']) {
      expect(images.some((i) => i.startsWith(image))).toBe(true);
    }
    const roles = appServices.map(([, s]) => s.environment.ROLES).sort();
    expect(roles).toEqual(['control', 'data', 'ingest', 'worker']);
  });

  it.each(appServices.map(([name, s]) => [name, s] as const))('%s sets every variable the app needs, and only known ones', (_name, service) => {
    const env: Record<string, string> = service.environment;
    for (const required of ['NODE_ENV', 'DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL', 'TEMPORAL_ADDRESS', 'ROLES', 'HOST']) {
      expect(env[required]).toBeTruthy();
    }
    for (const key of Object.keys(env)) expect(CONFIG_VARIABLES).toContain(key);
    // The production parser accepts it as is (no missing or malformed variable).
    const config = parseConfig(Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])));
    expect(config.NODE_ENV).toBe('production');
    expect(config).toMatchObject({ embedded: false, devMailbox: false, allowPrivateTargets: false, secureCookies: true });
  });

  it('points the app at the services defined in the same file', () => {
    for (const [, service] of appServices) {
      const env = service.environment;
      expect(compose.services[new URL(env.DATABASE_URL).hostname]).toBeDefined();
      expect(compose.services[new URL(env.REDIS_URL).hostname]).toBeDefined();
      expect(compose.services[new URL(env.CLICKHOUSE_URL).hostname]).toBeDefined();
      expect(compose.services[env.TEMPORAL_ADDRESS.split(':')[0]]).toBeDefined();
    }
  });
});
