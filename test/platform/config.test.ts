import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CONFIG_VARIABLES, ConfigError, parseConfig } from '../../api/config';
import { projectPath } from '../../api/infra/paths';

describe('configuration', () => {
  it('defaults to the embedded profile on the documented ports', () => {
    const config = parseConfig({});
    expect(config).toMatchObject({ PORT: 3000, DATA_PORT: 3001, INGEST_PORT: 3002, MANAGEMENT_PORT: 3003, HOST: '127.0.0.1', embedded: true });
    expect(config.ROLES).toEqual(['control', 'data', 'ingest', 'worker']);
    expect(config.dataDir).toMatch(/\/data$/);
  });

  it('names every bad or missing variable at once', () => {
    let error: unknown;
    try {
      parseConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', ROLES: 'control,nonsense', TRUST_PROXY: '-1' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    for (const name of ['PORT', 'DATABASE_URL', 'ROLES', 'TRUST_PROXY']) expect(problems).toContain(name);
  });

  it('requires every backend URL in production', () => {
    expect(() => parseConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://db/x' })).toThrow(
      /REDIS_URL: required when NODE_ENV=production[\s\S]*CLICKHOUSE_URL[\s\S]*TEMPORAL_ADDRESS/,
    );
  });

  it('switches each backend on its own', () => {
    const config = parseConfig({ REDIS_URL: 'redis://127.0.0.1:6379' });
    expect(config.embedded).toBe(false);
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it('reads from a Postgres replica only beside a Postgres primary', () => {
    expect(() => parseConfig({ DATABASE_READ_URL: 'postgres://replica/x' })).toThrow(/DATABASE_READ_URL: needs DATABASE_URL/);
    expect(() => parseConfig({ DATABASE_URL: 'postgres://db/x', DATABASE_READ_URL: 'mysql://replica/x' })).toThrow(/DATABASE_READ_URL/);
    expect(parseConfig({ DATABASE_URL: 'postgres://db/x', DATABASE_READ_URL: 'postgres://replica/x' }).DATABASE_READ_URL).toBe('postgres://replica/x');
  });

  it('places the analytics schema on a cluster only over a ClickHouse server', () => {
    expect(() => parseConfig({ CLICKHOUSE_CLUSTER: 'analytics' })).toThrow(/CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL/);
    expect(() => parseConfig({ CLICKHOUSE_URL: 'http://ch:8123', CLICKHOUSE_CLUSTER: 'a-b' })).toThrow(/CLICKHOUSE_CLUSTER/);
    expect(parseConfig({ CLICKHOUSE_URL: 'http://ch:8123', CLICKHOUSE_CLUSTER: 'analytics' }).CLICKHOUSE_CLUSTER).toBe('analytics');
  });

  it('refuses clashing listener ports', () => {
    expect(() => parseConfig({ PORT: '4000', DATA_PORT: '4000' })).toThrow(/must differ/);
  });

  it('turns tracing on only with an OTLP endpoint, the traces-specific one winning', () => {
    expect(parseConfig({}).tracesUrl).toBeUndefined();
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracesUrl).toBe('http://collector:4318/v1/traces');
    expect(parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://vendor.example/otlp/traces' }).tracesUrl).toBe('https://vendor.example/otlp/traces');
    expect(parseConfig({})).toMatchObject({ OTEL_SERVICE_NAME: 'flagship', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: 0.01 });
  });

  it('refuses what the tracing exporter cannot do, naming the variable', () => {
    expect(() => parseConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL: must be http\/protobuf or http\/json/);
    expect(() => parseConfig({ OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(() => parseConfig({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/OTEL_TRACES_SAMPLER/);
    expect(() => parseConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
  });

  it('lists the variables it reads (used by the compose and README checks)', () => {
    expect(CONFIG_VARIABLES).toEqual(expect.arrayContaining(['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL', 'TEMPORAL_ADDRESS', 'PORT']));
  });

  it('makes the process exit non-zero before starting anything', async () => {
    const run = promisify(execFile);
    const result = await run(process.execPath, ['-r', projectPath('node_modules/tsx/dist/cjs/index.cjs'), projectPath('api/main.ts')], {
      env: { ...process.env, PORT: 'not-a-port', DATABASE_URL: '' },
      timeout: 30_000,
    }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(result.code).toBe(78);
    expect(result.stderr).toContain('PORT');
    expect(result.stderr).not.toContain('listening');
  });
});
