import path from 'node:path';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';

/**
 * The whole environment, parsed once at start. Every other module receives the parsed
 * `Config` object; nothing reads process.env elsewhere.
 */

export const ROLES = ['control', 'data', 'ingest', 'worker'] as const;
/** REQUEST_DEADLINE_MS when not set (the outage tests run with it). */
export const DEFAULT_REQUEST_DEADLINE_MS = 4_000;
export type Role = (typeof ROLES)[number];

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const booleanFlag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on');
const isCidr = (value: string) => {
  try {
    ipaddr.parseCIDR(value);
    return true;
  } catch {
    return false;
  }
};
const optionalUrl = (protocols: string[]) =>
  z
    .string()
    .url()
    .refine((u) => protocols.includes(new URL(u).protocol), {
      message: `must use ${protocols.join(' or ')}`,
    })
    .optional();

/** OTLP over HTTP only: the gRPC exporter is not a dependency. */
const otlpProtocol = z.enum(['http/protobuf', 'http/json'], { message: "must be http/protobuf or http/json (OTLP over gRPC is not supported; use the collector's HTTP port, 4318)" });

/** Every listener's port variable; parseConfig refuses two listeners on one port. */
export const LISTENER_PORT_VARIABLES = ['PORT', 'DATA_PORT', 'INGEST_PORT', 'MANAGEMENT_PORT', 'FLAGD_PORT', 'FLAGD_SYNC_PORT'] as const;
/** Every listener on a port the system picks: several processes on one host (tests, benches). */
export const ANY_FREE_PORTS = Object.fromEntries(LISTENER_PORT_VARIABLES.map((name) => [name, '0'])) as Record<(typeof LISTENER_PORT_VARIABLES)[number], string>;

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: port.default(3000),
  DATA_PORT: port.default(3001),
  INGEST_PORT: port.default(3002),
  /**
   * The management listener (docs/operations.md#management-listener): /metrics, /livez and
   * /readyz, on every role, bound to HOST like the others and without authentication.
   */
  MANAGEMENT_PORT: port.default(3003),
  /** Which processes this instance runs; the embedded profile runs all four. */
  ROLES: z
    .string()
    .default(ROLES.join(','))
    .transform((s) => s.split(',').map((r) => r.trim()).filter(Boolean))
    .pipe(z.array(z.enum(ROLES)).min(1)),
  /**
   * flagd's protocols on the data plane (docs/local-evaluation.md#ports): FLAGD_PORT serves
   * flagd.evaluation v1 and v2 (gRPC and Connect), FLAGD_SYNC_PORT flagd.sync.v1 (gRPC); 0 picks
   * a free port. FLAGD_ENABLED=false opens neither. FLAGD_TLS_CERT and FLAGD_TLS_KEY are PEM file
   * paths; with both set the two ports speak TLS (HTTP/2 and HTTP/1.1 by ALPN).
   */
  FLAGD_ENABLED: booleanFlag.default('true'),
  FLAGD_PORT: port.default(8013),
  FLAGD_SYNC_PORT: port.default(8015),
  FLAGD_TLS_CERT: z.string().optional(),
  FLAGD_TLS_KEY: z.string().optional(),
  /** How often the token of every open flagd stream is verified again (a revoked token's streams end within it). */
  FLAGD_CREDENTIAL_RECHECK_MS: positiveInt.default(2_000),
  DATA_DIR: z.string().min(1).default('./data'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  APP_COMMIT: z.string().default('unknown'),
  /** Public address of the control plane, used in links we hand out (trigger URLs, mails). */
  PUBLIC_BASE_URL: z.string().url().optional(),

  DATABASE_URL: optionalUrl(['postgres:', 'postgresql:']),
  DATABASE_POOL_SIZE: positiveInt.default(10),
  /**
   * A streaming replica of DATABASE_URL for the read routes that allow it (flag lists, history,
   * audit search, export), each caller still reading their own writes (docs/operations.md#read-replica).
   */
  DATABASE_READ_URL: optionalUrl(['postgres:', 'postgresql:']),
  /**
   * Deadlines (docs/operations.md#faults-and-recovery): a request still unanswered after
   * REQUEST_DEADLINE_MS is answered 503 with Retry-After and commits nothing afterwards;
   * BACKEND_TIMEOUT_MS bounds one Postgres connection attempt, one Redis command and one Temporal
   * call; a Postgres connection silent for DATABASE_REPLY_TIMEOUT_MS while a query waits is destroyed.
   */
  REQUEST_DEADLINE_MS: positiveInt.default(DEFAULT_REQUEST_DEADLINE_MS),
  BACKEND_TIMEOUT_MS: positiveInt.default(3_000),
  DATABASE_REPLY_TIMEOUT_MS: positiveInt.default(15_000),
  REDIS_URL: optionalUrl(['redis:', 'rediss:']),
  /** Namespaces every key and channel, so several deployments (or test runs) can share a Redis. */
  REDIS_KEY_PREFIX: z.string().min(1).default('flags:'),
  CLICKHOUSE_URL: optionalUrl(['http:', 'https:']),
  /** chDB data directory (default DATA_DIR/chdb); chDB allows one per process, shared by its sessions. */
  CHDB_PATH: z.string().optional(),
  CLICKHOUSE_DATABASE: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).default('flags'),
  /** A cluster of the server's remote_servers: replicated, sharded schema (docs/clickhouse-cluster.md). */
  CLICKHOUSE_CLUSTER: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a cluster name from remote_servers').optional(),
  TEMPORAL_ADDRESS: z.string().regex(/^[^:\s]+:\d+$/, 'must be host:port').optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('flags'),
  TEMPORAL_CLI_PATH: z.string().min(1).default('temporal'),
  /** A prebuilt workflow bundle (made by `npm run build`); bundling at start when absent. */
  WORKFLOW_BUNDLE_PATH: z.string().optional(),

  SMTP_URL: optionalUrl(['smtp:', 'smtps:']),
  MAIL_FROM: z.string().default('flags@localhost'),
  /** Number of trusted reverse-proxy hops in front of us; 0 = use the socket address. */
  TRUST_PROXY: z.coerce.number().int().min(0).max(10).default(0),
  /**
   * Browser ingestion's country (docs/api-reference.md#browser-analytics): read from COUNTRY_HEADER
   * only when the socket peer is in one of these comma-separated CIDRs (the proxy that sets it,
   * e.g. Cloudflare's ranges or the load balancer's subnet); '' otherwise, since any client can
   * send the header itself.
   */
  TRUSTED_PROXIES: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .pipe(z.array(z.string().refine(isCidr, 'must be CIDRs such as 10.0.0.0/8 or 2400:cb00::/32'))),
  COUNTRY_HEADER: z.string().regex(/^[A-Za-z0-9-]+$/).default('CF-IPCountry'),
  /**
   * Admin analytics (/ingest/admin-events, docs/analytics-ingestion.md): a site id accepted beside
   * svc_admin_prod, _preview and _dev.
   */
  ADMIN_ANALYTICS_SITE_ID: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/).optional(),
  SESSION_TTL_HOURS: positiveInt.default(24 * 14),
  /** Instance administrators by (verified) e-mail, comma-separated: /api/health/admin and /api/health/evaluation. */
  ADMIN_EMAILS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim().toLowerCase()).filter(Boolean)),
  SCRYPT_COST_LOG2: z.coerce.number().int().min(10).max(20).default(17),
  /**
   * Password hashes computed at once, and how many may wait: scrypt runs on libuv's pool (4
   * threads by default), which DNS lookups, file and zlib work share.
   */
  SCRYPT_CONCURRENCY: positiveInt.default(2),
  SCRYPT_MAX_QUEUE: z.coerce.number().int().min(0).default(100),
  /** Every /api/auth/* request per client IP (IPv6 by /64) and AUTH_RATE_LIMIT_WINDOW_SECONDS. */
  AUTH_RATE_LIMIT_PER_IP: positiveInt.default(30),
  AUTH_RATE_LIMIT_WINDOW_SECONDS: positiveInt.default(60),
  /**
   * Sign-in lockout per account: after AUTH_LOCKOUT_THRESHOLD failures (counted for a day from
   * the first), each further failure locks for BASE * 2^k seconds, at most MAX.
   */
  AUTH_LOCKOUT_THRESHOLD: positiveInt.default(5),
  AUTH_LOCKOUT_BASE_SECONDS: positiveInt.default(30),
  AUTH_LOCKOUT_MAX_SECONDS: positiveInt.default(3600),
  /** Mail a user makes us send (verification resends, alert-channel tests and confirmations) per window. */
  SEND_LIMIT_PER_USER: positiveInt.default(10),
  SEND_LIMIT_PER_RECIPIENT: positiveInt.default(5),
  SEND_LIMIT_WINDOW_SECONDS: positiveInt.default(3600),

  RATE_LIMIT_PER_IP: positiveInt.default(1000),
  RATE_LIMIT_PER_TOKEN: positiveInt.default(5000),
  RATE_LIMIT_PER_SERVICE: positiveInt.default(10000),
  RATE_LIMIT_WINDOW_SECONDS: positiveInt.default(60),

  /** Public address of the data plane, handed to SDKs by /api/sdk-config (default: the request's origin). */
  PUBLIC_DATA_URL: z.string().url().optional(),
  /**
   * Origins the web console may connect to besides its own (its Content-Security-Policy
   * connect-src), comma-separated; PUBLIC_DATA_URL's origin is always added.
   */
  CONSOLE_CONNECT_SRC: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .pipe(z.array(z.string().url().transform((url) => new URL(url).origin))),
  /** Evaluation snapshots compare themselves with Postgres this often (repairs lost bus messages). */
  EVAL_SNAPSHOT_RECONCILE_MS: z.coerce.number().int().min(0).default(30_000),
  /** Hot-path rate-limit counters are added to the shared cache this often. */
  EVAL_RATE_LIMIT_SYNC_MS: positiveInt.default(250),
  /** Evaluation events: rows per ClickHouse insert, longest wait of a partial batch, events held in memory. */
  EVAL_EVENTS_BATCH_SIZE: positiveInt.default(250_000),
  EVAL_EVENTS_FLUSH_MS: positiveInt.default(5_000),
  EVAL_EVENTS_MAX_BUFFERED: positiveInt.default(750_000),
  /**
   * Alike evaluation requests (same targeting key and results) within this window are written as
   * one row per flag with their count (api/features/evaluation/recorder.ts). Short, so what waits
   * is young garbage, not objects the collector must trace in the old generation.
   */
  EVAL_EVENTS_FOLD_MS: positiveInt.default(250),
  /**
   * Every other analytics table (outcome events, SDK telemetry, web vitals, client errors, browser
   * and admin events), each with its own buffer: rows per insert, longest wait, rows held in
   * memory (beyond it ingestion answers 503).
   */
  ANALYTICS_BATCH_SIZE: positiveInt.default(20_000),
  ANALYTICS_FLUSH_MS: positiveInt.default(5_000),
  ANALYTICS_MAX_BUFFERED: positiveInt.default(100_000),
  /** Days raw analytics rows are kept, and per-minute rollups (applied as table TTLs by the schema owner). */
  ANALYTICS_RETENTION_DAYS: positiveInt.default(90),
  ANALYTICS_ROLLUP_RETENTION_DAYS: positiveInt.default(400),
  /** SSE / EventStream heartbeat interval and the Last-Event-ID replay window per service. */
  STREAM_HEARTBEAT_MS: positiveInt.default(15_000),
  STREAM_REPLAY_MAX_EVENTS: positiveInt.default(5_000),
  STREAM_REPLAY_MAX_AGE_MS: positiveInt.default(15 * 60_000),
  /**
   * Open SSE / EventStream connections per process: per client IP (IPv6 by /64), per credential
   * (project token or dashboard user), per service (credentialed and anonymous streams counted
   * apart). Past a cap: 429 (RESOURCE_EXHAUSTED on the EventStream) with Retry-After.
   */
  STREAM_MAX_PER_IP: positiveInt.default(100),
  STREAM_MAX_PER_CREDENTIAL: positiveInt.default(2_000),
  STREAM_MAX_PER_SERVICE: positiveInt.default(5_000),
  /** A stream client is dropped past this much unsent output, or when its socket stays backed up this long. */
  STREAM_MAX_BUFFERED_BYTES: positiveInt.default(1024 * 1024),
  STREAM_STALL_TIMEOUT_MS: positiveInt.default(30_000),
  /**
   * Work one evaluation request may do (docs/data-plane.md, "Regular-expression budget"):
   * conditions of the flags it evaluates, and milliseconds spent in `matches` patterns. Past
   * either, the remaining flags answer ERROR / GENERAL.
   */
  EVAL_BUDGET_CONDITIONS: positiveInt.default(100_000),
  EVAL_BUDGET_REGEX_MS: z.coerce.number().min(0).default(5),
  /**
   * Evaluation-context ring size per instance
   * (docs/data-plane.md#context-ring-get-apicontexts-control-plane, /api/contexts).
   */
  CONTEXT_RING_SIZE: positiveInt.default(1_000),
  /**
   * Context attributes never stored in the recent-contexts warehouse that simulate replays
   * (docs/simulate.md): names compared at any depth, ignoring case, `_`, `-` and `.`.
   */
  CONTEXT_ATTRIBUTE_DENYLIST: z
    .string()
    .default('email,ip,ipAddress,phone,phoneNumber,firstName,lastName,fullName,address,street,postalCode,zip,birthDate,dateOfBirth,ssn,password,secret,token,apiKey,authorization,cookie,creditCard,cardNumber,iban')
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean)),
  /** Largest attributes JSON stored per context; attributes that do not fit are left out. */
  CONTEXT_ATTRIBUTE_MAX_BYTES: positiveInt.default(4_096),

  DEMO_SERVICE_IDS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean)),
  /**
   * Seed the 4,096-flag public demo service at start (docs/api-reference.md#demo-service); default:
   * on the embedded profile only.
   */
  DEMO_SEED: booleanFlag.optional(),
  /**
   * Development conveniences: on in the embedded profile (no backend URL set), off as soon as
   * any backend URL is set unless named here. Webhooks and alert channels may target
   * loopback/private hosts; GET /api/dev/mailbox shows mail kept when SMTP_URL is unset;
   * session cookies without `Secure` (plain-HTTP dashboards).
   */
  ALLOW_PRIVATE_WEBHOOK_TARGETS: booleanFlag.optional(),
  /**
   * Prometheus servers canary and guardrail guards may query (docs/canary.md#who-may-point-a-guard-where):
   * comma-separated http(s) origins; empty, the default, allows none.
   */
  PROMETHEUS_URL_ALLOWLIST: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .pipe(z.array(z.string().url().regex(/^https?:\/\//i, 'must be an http or https origin'))),
  /** Budget of one guard query: connect, answer and body. */
  PROMETHEUS_GUARD_TIMEOUT_MS: positiveInt.default(5_000),
  DEV_MAILBOX: booleanFlag.optional(),
  INSECURE_COOKIES: booleanFlag.optional(),
  SHUTDOWN_GRACE_MS: positiveInt.default(8000),
  /** Slow clients: time to receive the headers, and the whole request. */
  HTTP_HEADERS_TIMEOUT_MS: positiveInt.default(15_000),
  HTTP_REQUEST_TIMEOUT_MS: positiveInt.default(30_000),
  /** Open connections per listener (server.maxConnections); further ones are closed on accept. */
  HTTP_MAX_CONNECTIONS: positiveInt.default(20_000),

  /**
   * Project JWTs (docs/api-reference.md#project-api-tokens) are signed with Ed25519 (EdDSA).
   * JWT_PRIVATE_KEY is the current signing key as PKCS#8 PEM (`\\n` escapes allowed); required in
   * production, generated once under DATA_DIR otherwise. JWT_KEY_ID names it (default: its RFC 7638
   * thumbprint). JWT_PUBLIC_KEYS is a JWKS (`{"keys":[…]}`, each with `kid`) of retired keys whose
   * tokens are still accepted while they run out.
   */
  JWT_PRIVATE_KEY: z.string().optional(),
  JWT_KEY_ID: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/).optional(),
  JWT_PUBLIC_KEYS: z.string().optional(),
  JWT_ISSUER: z.string().min(1).default('flagship'),
  JWT_AUDIENCE: z.string().min(1).default('flagship-api'),

  /**
   * Tracing (docs/operations.md#tracing): on only when an OTLP endpoint is set, otherwise the
   * OpenTelemetry SDK is not even loaded. The standard variables: OTEL_EXPORTER_OTLP_ENDPOINT is
   * the collector's base URL (`/v1/traces` is appended), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT the
   * full traces URL (wins). OTLP over HTTP, protobuf (default) or JSON. The sampler defaults to
   * parent-based 1%: a caller's sampled trace is always continued, new traces start for 1% of requests.
   */
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl(['http:', 'https:']),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalUrl(['http:', 'https:']),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default('flagship'),
  OTEL_TRACES_SAMPLER: z
    .enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'])
    .default('parentbased_traceidratio'),
  /** The ratio of the `traceidratio` samplers, 0 to 1. */
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).default(0.01),
});

export type Config = z.infer<typeof envSchema> & {
  /** Absolute DATA_DIR. */
  dataDir: string;
  /** True when no backend URL is set at all (docs/api-reference.md#profiles). */
  embedded: boolean;
  allowPrivateTargets: boolean;
  devMailbox: boolean;
  secureCookies: boolean;
  /** Where spans go (OTLP over HTTP); undefined when tracing is off. */
  tracesUrl: string | undefined;
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** The variables the application reads; docker-compose and the README are checked against it. */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape) as (keyof typeof envSchema.shape)[];

export function parseConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings mean "unset", as in a compose file with `VAR: ""`.
  const cleaned = Object.fromEntries(
    Object.entries(env).filter(([k, v]) => k in envSchema.shape && v !== undefined && v !== ''),
  );
  const result = envSchema.safeParse(cleaned);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`),
    );
  }
  const parsed = result.data;
  const problems: string[] = [];
  if (parsed.NODE_ENV === 'production') {
    for (const required of ['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL', 'TEMPORAL_ADDRESS'] as const) {
      if (!parsed[required]) problems.push(`${required}: required when NODE_ENV=production`);
    }
    // Replicas must share one signing key; a per-process generated key would split them.
    if (!parsed.JWT_PRIVATE_KEY) problems.push('JWT_PRIVATE_KEY: required when NODE_ENV=production (an Ed25519 PKCS#8 PEM, e.g. `openssl genpkey -algorithm ed25519`)');
  }
  const flagdPorts = parsed.FLAGD_ENABLED ? [parsed.FLAGD_PORT, parsed.FLAGD_SYNC_PORT] : [];
  const ports = [parsed.PORT, parsed.DATA_PORT, parsed.INGEST_PORT, parsed.MANAGEMENT_PORT, ...flagdPorts].filter((p) => p !== 0);
  if (new Set(ports).size !== ports.length) problems.push(`${LISTENER_PORT_VARIABLES.join(', ')}: must differ`);
  if (parsed.DATABASE_READ_URL && !parsed.DATABASE_URL) problems.push('DATABASE_READ_URL: needs DATABASE_URL (the embedded PGlite has no replica)');
  if (parsed.CLICKHOUSE_CLUSTER && !parsed.CLICKHOUSE_URL) problems.push('CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL (chDB is a single node)');
  if (Boolean(parsed.FLAGD_TLS_CERT) !== Boolean(parsed.FLAGD_TLS_KEY)) problems.push('FLAGD_TLS_CERT, FLAGD_TLS_KEY: set both or neither');
  if (problems.length) throw new ConfigError(problems);

  // Not NODE_ENV: a deployment that forgets it must not expose the mailbox or reach private hosts.
  const embedded = !parsed.DATABASE_URL && !parsed.REDIS_URL && !parsed.CLICKHOUSE_URL && !parsed.TEMPORAL_ADDRESS;
  return {
    ...parsed,
    dataDir: path.resolve(parsed.DATA_DIR),
    embedded,
    allowPrivateTargets: parsed.ALLOW_PRIVATE_WEBHOOK_TARGETS ?? embedded,
    devMailbox: parsed.DEV_MAILBOX ?? embedded,
    secureCookies: !(parsed.INSECURE_COOKIES ?? embedded),
    tracesUrl: parsed.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (parsed.OTEL_EXPORTER_OTLP_ENDPOINT && `${parsed.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`),
  };
}
