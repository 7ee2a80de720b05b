import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { operationIdOf } from '../../api/http/openapi';
import { startTestApp, type TestApp } from '../support/harness';

const run = promisify(execFile);
const REPO = path.resolve(__dirname, '../..');

let app: TestApp;
let dir: string;
beforeAll(async () => {
  app = await startTestApp();
  dir = mkdtempSync(path.join(os.tmpdir(), 'openapi-lint-'));
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await app?.stop();
});

type Operations = Record<string, Record<string, { operationId?: string; responses?: unknown }>>;

describe('the OpenAPI document', () => {
  it('passes Redocly lint with the recommended rules (redocly.yaml says which two are off and why)', async () => {
    const res = await app.request('GET', '/api/openapi.json');
    expect(res.status).toBe(200);
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(res.body));
    const bin = path.join(REPO, 'node_modules', '.bin', 'redocly');
    const outcome = await run(bin, ['lint', '--config', path.join(REPO, 'redocly.yaml'), '--format=json', file], {
      cwd: dir,
      // Only loopback traffic in tests: no usage telemetry, no update check.
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    }).then(
      (r) => r.stdout,
      (error: { stdout?: string }) => error.stdout ?? '',
    );
    const { problems } = JSON.parse(outcome) as { problems: { ruleId: string; message: string; location: { pointer: string }[] }[] };
    expect(problems.map((p) => `${p.ruleId}: ${p.message} (${p.location[0]?.pointer})`)).toEqual([]);
  }, 60_000);

  it('gives every operation a unique operationId derived from its method and path', async () => {
    const paths = (await app.request('GET', '/api/openapi.json')).body.paths as Operations;
    const ids = new Set<string>();
    let operations = 0;
    for (const [route, methods] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (operation.responses === undefined) continue;
        operations++;
        expect(operation.operationId).toBe(operationIdOf(method, route));
        ids.add(operation.operationId!);
      }
    }
    expect(operations).toBeGreaterThan(100);
    expect(ids.size).toBe(operations);
  });

  it('names operations readably', () => {
    expect(operationIdOf('get', '/api/flags/{key}/versions')).toBe('getFlagsByKeyVersions');
    expect(operationIdOf('post', '/api/ofrep/v1/evaluate/flags/{key}')).toBe('postOfrepV1EvaluateFlagsByKey');
    expect(operationIdOf('get', '/.well-known/oauth-protected-resource')).toBe('getWellKnownOauthProtectedResource');
    expect(operationIdOf('delete', '/api/projects/{id}/cohorts/{cohortId}')).toBe('deleteProjectsByIdCohortsByCohortId');
  });
});
