import { randomBytes, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { ZodUnknown, type z, type ZodTypeAny } from 'zod';
import { enforceCredentialPolicy, type AccessRule, type CredentialPolicy, type ProjectAccess, type ProjectGrant } from '../auth/access';
import type { Principal } from '../auth/principal';
import type { Logger } from '../infra/logger';
import type { Sql } from '../infra/postgres';
import type { ReadRouting } from '../infra/read-replica';
import { checkBodyHeaders } from './body';
import { forbidden, HttpError, malformedJson, payloadTooLarge, requestAborted, validationFailed, type FieldProblem } from './errors';

export const KB = 1024;
/**
 * Request-size limits (docs/limits.md#request-sizes); anonymousBulk is what an unauthenticated demo
 * write may send (4,096 updates fit in about 0.5 MB).
 */
export const BODY_LIMITS = { default: 256 * KB, flagWrite: 256 * KB, evaluation: 64 * KB, bulk: 25.6 * 1024 * KB, anonymousBulk: 1024 * KB } as const;

export interface RequestContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  principal: Principal;
  /** What the route's `access` rule granted: one project for a single resource, any number for a list. */
  granted: ProjectGrant[];
  /**
   * Where a route declaring `reads: 'replica'` reads, chosen for this caller: the read replica, or
   * the primary until the replica has this caller's writes. Absent without a replica: read the primary.
   */
  reader?: Sql;
  ip: string;
  userAgent: string;
  requestId: string;
  log: Logger;
  req: Request;
  res: Response;
}

/** A handler returns data (sent as JSON with the route's status) or a Reply for anything else. */
export class Reply {
  constructor(
    readonly status: number,
    readonly body?: unknown,
    readonly headers: Record<string, string> = {},
  ) {}
}
export const reply = (status: number, body?: unknown, headers?: Record<string, string>) => new Reply(status, body, headers);

/** Cache-Control of per-caller answers (analytics, insights, canary): never in a shared cache. */
export const privateMaxAge = (seconds: number) => ({ 'Cache-Control': `private, max-age=${seconds}` });
export const PRIVATE_NO_CACHE = { 'Cache-Control': 'private, no-cache' };
export const PRIVATE_NO_STORE = { 'Cache-Control': 'private, no-store' };
/** Returned by handlers that wrote the response themselves (streams). */
export const HANDLED = Symbol('handled');

/**
 * What a route declares apart from how it answers: its path, schemas and documentation, and the
 * policy every edge executes from it before its handler (admit, bodyLimitOf): the credential
 * policy (`auth` ...: CredentialPolicy), CSRF, the body limit. The OpenAPI catalog reads it;
 * Express routes (RouteSpec) add a handler, routes of the evaluation lean edge a fast one (lean.ts).
 */
export interface RouteDeclaration<P extends ZodTypeAny, Q extends ZodTypeAny, B extends ZodTypeAny> extends CredentialPolicy {
  method: 'get' | 'post' | 'patch' | 'put' | 'delete' | 'options';
  path: string;
  summary: string;
  tags?: string[];
  /**
   * Who may call it beyond `auth`: the capability it needs and the resource it applies to
   * (AccessRule, api/auth/access.ts), checked after validation and before the handler.
   * Absent: `auth` alone decides (routes on the caller's own account, public routes).
   */
  access?: AccessRule<RequestContext<z.infer<P>, z.infer<Q>, z.infer<B>>>;
  params?: P;
  query?: Q;
  body?: B;
  /** Documented response body; `status` defaults to 200 (201 for documented creates is set here). */
  response?: ZodTypeAny;
  status?: number;
  /** Largest body read, in bytes; BODY_LIMITS.default when absent. */
  bodyLimit?: number;
  /** The body limit for anonymous callers of a public route, when smaller than `bodyLimit` (the demo bulk write). */
  anonymousBodyLimit?: number;
  /** Reads a JSON body sent as text/plain too (browser beacons: navigator.sendBeacon, no-preflight posts). */
  textPlainJson?: boolean;
  /** Skips the CSRF check for cookie sessions (only for routes that cannot be driven cross-site harmfully). */
  csrfExempt?: boolean;
  /**
   * `replica`: a read that may go to the Postgres read replica (DATABASE_READ_URL,
   * docs/operations.md#read-replica) through `ctx.reader`; each caller still reads their own writes.
   */
  reads?: 'replica';
}

/** A route Express serves: its declaration and its handler. */
export interface RouteSpec<P extends ZodTypeAny, Q extends ZodTypeAny, B extends ZodTypeAny> extends RouteDeclaration<P, Q, B> {
  /**
   * A cheap check of the common valid body, for bodies too big for zod to be cheap (the 4,096-flag
   * demo batch): the body when it certainly passes `body`, undefined to let zod decide and explain.
   */
  quickBody?: (raw: unknown) => z.infer<B> | undefined;
  /**
   * Runs after authentication and before a byte of the body is read: a route's own rate limit
   * (so refused requests cost no reading) and headers every answer needs, errors included (CORS).
   */
  beforeBody?: (ctx: RequestContext<unknown, unknown, unknown>) => Promise<void> | void;
  handler: (ctx: RequestContext<z.infer<P>, z.infer<Q>, z.infer<B>>) => Promise<unknown> | unknown;
}

// Type-erased forms used when collecting routes of many shapes in one array.
export type AnyRoute = RouteSpec<ZodTypeAny, ZodTypeAny, ZodTypeAny>;
export type AnyDeclaration = RouteDeclaration<ZodTypeAny, ZodTypeAny, ZodTypeAny>;

/** The HTTP listeners a process opens (api/server.ts). */
export type Listener = 'control' | 'data' | 'ingest';
/** A feature's routes, by the listener that serves them. */
export type ListenerRoutes = Partial<Record<Listener, AnyRoute[]>>;

export function defineRoute<P extends ZodTypeAny = ZodTypeAny, Q extends ZodTypeAny = ZodTypeAny, B extends ZodTypeAny = z.ZodUndefined>(
  spec: RouteSpec<P, Q, B>,
): AnyRoute {
  return spec as unknown as AnyRoute;
}

export interface RouteDeps {
  logger: Logger;
  /** The OpenAPI catalog (openapi.ts), which reads routes: named by what the router calls, so neither module imports the other. */
  openapi: { register(route: AnyDeclaration): void };
  /** Enforces the routes' `access` rules; needed when any route declares one. */
  access?: Pick<ProjectAccess, 'check'>;
  /** Called after authentication: per-token rate limits and anything else every route needs. */
  afterAuth?: (ctx: RequestContext<unknown, unknown, unknown>) => Promise<void>;
  /** The read replica's routing, when DATABASE_READ_URL is set: picks `ctx.reader`, and notes every caller's writes. */
  reads?: Pick<ReadRouting, 'readerFor' | 'wrote' | 'failedOn' | 'primary'>;
}

const MUTATING = new Set(['post', 'patch', 'put', 'delete']);
/** How JSON spells a NUL character; a body without it holds none. */
const ESCAPED_NUL = Buffer.from('\\u0000');

export function mountRoutes(router: Router, routes: AnyRoute[], deps: RouteDeps): void {
  for (const route of fixedSegmentsFirst(routes)) {
    const gate = deps.access;
    if (route.access && !gate) throw new Error(`${route.method.toUpperCase()} ${route.path} declares access but no access gate was given`);
    deps.openapi.register(route);
    const readBody = bodyReader(route, bodyLimitOf(route, false));
    const readAnonymousBody = route.anonymousBodyLimit === undefined ? readBody : bodyReader(route, bodyLimitOf(route, true));
    router[route.method](route.path, async (req: Request, res: Response, next: NextFunction) => {
      try {
        const principal = req.principal;
        // Everything that can refuse the caller runs before a byte of the body is read, so a
        // refused request costs no reading or parsing (a 25 KB gzip bomb inflates to 25.6 MB).
        admit(route, principal, req.method, req.get('x-csrf-token'));
        const ctx: RequestContext<unknown, unknown, unknown> = {
          params: req.params,
          query: req.query,
          body: undefined,
          principal,
          granted: [],
          ip: req.clientIp,
          userAgent: req.get('user-agent') ?? '',
          requestId: req.requestId,
          log: req.log,
          req,
          res,
        };
        if (deps.afterAuth) await deps.afterAuth(ctx);
        if (route.beforeBody) await route.beforeBody(ctx);
        await (principal.type === 'anonymous' ? readAnonymousBody : readBody)(req, res);
        Object.assign(ctx, validate(route, req));
        if (route.access && gate) ctx.granted = await gate.check(route.access, principal, ctx);
        if (route.reads === 'replica' && deps.reads) ctx.reader = await deps.reads.readerFor(principal);
        let result: unknown;
        try {
          result = await route.handler(ctx as never);
        } catch (error) {
          // A replica that failed mid-read: the same read again on the primary.
          if (!(ctx.reader && !(error instanceof HttpError) && deps.reads?.failedOn(ctx.reader, error))) throw error;
          ctx.reader = deps.reads.primary;
          result = await route.handler(ctx as never);
        } finally {
          // Before the answer leaves: the caller's next read must find this write, even one that failed halfway.
          // A cache or primary that fails here costs that read-your-writes, not the write's answer.
          if (deps.reads && MUTATING.has(route.method)) await deps.reads.wrote(principal).catch((error: unknown) => ctx.log.warn({ err: error }, 'read-your-writes position not noted'));
        }
        if (result === HANDLED) return;
        send(res, result instanceof Reply ? result : new Reply(result === undefined ? 204 : route.status ?? 200, result));
      } catch (error) {
        next(error);
      }
    });
  }
}

/**
 * Where paths overlap, a fixed segment wins over a parameter (GET /api/flags/export before
 * GET /api/flags/:key), whatever order the features list their routes in. Stable otherwise.
 */
function fixedSegmentsFirst(routes: AnyRoute[]): AnyRoute[] {
  const rank = (path: string) => path.split('/').map((segment) => (/^[:*]/.test(segment) ? 1 : 0));
  const ranked = routes.map((route) => ({ route, rank: rank(route.path) }));
  ranked.sort((a, b) => {
    for (let i = 0; i < Math.min(a.rank.length, b.rank.length); i++) if (a.rank[i] !== b.rank[i]) return a.rank[i] - b.rank[i];
    return a.rank.length - b.rank.length;
  });
  return ranked.map((r) => r.route);
}

function send(res: Response, r: Reply) {
  for (const [k, v] of Object.entries(r.headers)) res.setHeader(k, v);
  if (r.body === undefined || r.status === 204 || r.status === 304) res.status(r.status).end();
  else res.status(r.status).json(r.body);
}

/**
 * Reads the JSON body into req.body, with `limit`; a body on a route without one is ignored.
 * Its headers are checked as on the lean path (checkBodyHeaders): compressed bodies, other
 * types and declared lengths over the limit are refused before a byte is read.
 */
function bodyReader(route: AnyRoute, limit: number) {
  const parser = express.json({
    limit,
    type: () => true,
    inflate: false,
    verify: (req, _res, raw) => {
      (req as Request).bodyMayHoldNul = raw.includes(ESCAPED_NUL);
    },
  });
  return (req: Request, res: Response) =>
    new Promise<void>((resolve, reject) => {
      if (!route.body) return resolve();
      const problem = checkBodyHeaders(req.headers, limit, { textPlainJson: route.textPlainJson });
      if (problem === null) {
        req.body = undefined;
        return resolve();
      }
      if (problem !== undefined) return reject(problem);
      parser(req, res, (err?: unknown) => {
        if (!err) return resolve();
        const e = err as { type?: string; status?: number };
        if (e.type === 'entity.too.large') return reject(payloadTooLarge(limit));
        if (e.type === 'entity.parse.failed') return reject(malformedJson());
        if (e.type === 'charset.unsupported') return reject(new HttpError(415, 'Unsupported body charset'));
        if (e.type === 'request.aborted') return reject(requestAborted());
        reject(err);
      });
    });
}

/**
 * The policy a route declares, executed by every edge that serves it (mountRoutes for Express,
 * the evaluation lean edge, and any other transport) after authentication and before a byte of
 * the body is read: its credential policy (enforceCredentialPolicy), then CSRF for cookie
 * sessions. `csrfHeader` is the request's X-CSRF-Token. Synchronous and without I/O, for hot paths.
 */
export function admit(route: AnyDeclaration, principal: Principal, method: string, csrfHeader: string | undefined): void {
  enforceCredentialPolicy(route, principal, method);
  checkCsrf(principal, method, csrfHeader, route.csrfExempt);
}

/** The largest body a route reads from a caller (anonymous or not), in bytes, as it declares it. */
export function bodyLimitOf(route: AnyDeclaration, anonymous: boolean): number {
  if (anonymous && route.anonymousBodyLimit !== undefined) return route.anonymousBodyLimit;
  return route.bodyLimit ?? BODY_LIMITS.default;
}

/** Cookie-session mutations carry X-CSRF-Token (from GET /api/csrf-token); bearer requests never need it. */
export function checkCsrf(p: Principal, method: string, header: string | undefined, exempt?: boolean) {
  if (p.type !== 'session' || exempt || !MUTATING.has(method.toLowerCase())) return;
  if (!header || !safeEqual(p.csrfToken, header)) {
    throw forbidden('missing or invalid CSRF token; send the X-CSRF-Token header from GET /api/csrf-token');
  }
}

export const randomToken = () => randomBytes(24).toString('base64url');

export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Where a JSON value holds a NUL character, in a string or a key (null: nowhere). Postgres text and
 * jsonb cannot store one: refused as a 400 here instead of failing the write.
 */
function nulPath(value: unknown, path: string): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, item] of Object.entries(value)) {
    if (key.includes('\u0000')) return path;
    const found = nulPath(item, `${path}.${key}`);
    if (found) return found;
  }
  return null;
}

/** A route's params, query and body through its schemas (also for calls made in-process: the MCP tools). */
export function validate(route: AnyRoute, req: Pick<Request, 'params' | 'query' | 'body' | 'bodyMayHoldNul'>) {
  const problems: FieldProblem[] = [];
  const out: Record<string, unknown> = {};
  const parts = [
    ['params', route.params, req.params],
    ['query', route.query, req.query],
    ['body', route.body, route.body ? (req.body ?? undefined) : undefined],
  ] as const;
  for (const [where, schema, input] of parts) {
    if (!schema) {
      out[where] = where === 'body' ? undefined : input;
      continue;
    }
    const quick = where === 'body' && route.quickBody ? route.quickBody(input) : undefined;
    if (quick !== undefined) {
      out[where] = quick;
      continue;
    }
    const parsed = schema.safeParse(input);
    if (parsed.success) out[where] = parsed.data;
    else for (const issue of parsed.error.issues) problems.push({ path: [where, ...issue.path].join('.'), message: issue.message });
  }
  if (problems.length) throw validationFailed(problems);
  // After the schema's own problems; a body taken as z.unknown() is checked by its handler, in its
  // protocol's terms (OAuth registration). Bodies read by Express are searched only when their
  // text spelled a NUL; in-process calls always.
  const nul = route.body && !(route.body instanceof ZodUnknown) && req.bodyMayHoldNul !== false ? nulPath(out.body, 'body') : null;
  if (nul) throw validationFailed([{ path: nul, message: 'must not contain NUL characters' }]);
  return out;
}
