import { enforceCredentialPolicy, type ProjectAccess } from '../../auth/access';
import type { Principal } from '../../auth/principal';
import { HttpError, payloadTooLarge } from '../../http/errors';
import { bodyLimitOf, HANDLED, Reply, validate, type AnyRoute, type RequestContext } from '../../http/route';

export interface RouteCall {
  params?: Record<string, string>;
  query?: Record<string, string | undefined>;
  body?: unknown;
}

/** The request an MCP tool call arrived in: who calls, and what the REST handlers read of it. */
export type Caller = Pick<RequestContext<unknown, unknown, unknown>, 'principal' | 'ip' | 'userAgent' | 'requestId' | 'log' | 'req' | 'res'>;

/**
 * Runs a REST route in-process for an MCP tool, through everything the route declares: its
 * credential policy (personal-token refusals, read-only tiers), its schemas, its `access` rule
 * through the one gate, its own pre-body hook, then its handler. A tool therefore can do exactly
 * what the same caller could do over REST, and nothing is decided twice.
 */
export class RouteInvoker {
  private readonly byKey = new Map<string, AnyRoute>();

  constructor(
    routes: readonly AnyRoute[],
    private readonly gate: Pick<ProjectAccess, 'check'>,
  ) {
    for (const route of routes) this.byKey.set(`${route.method} ${route.path}`, route);
  }

  has(method: AnyRoute['method'], path: string): boolean {
    return this.byKey.has(`${method} ${path}`);
  }

  /** The handler's answer (body and status); refusals and validation errors throw HttpError as over REST. */
  async call(caller: Caller, method: AnyRoute['method'], path: string, input: RouteCall): Promise<{ status: number; body: unknown }> {
    const route = this.byKey.get(`${method} ${path}`);
    if (!route) throw new HttpError(404, `${method.toUpperCase()} ${path} is not served by this instance`);
    const principal: Principal = caller.principal;
    // The credential policy of the tool's route; CSRF was the /mcp request's own check.
    enforceCredentialPolicy(route, principal, method.toUpperCase());
    const ctx: RequestContext<unknown, unknown, unknown> = { ...caller, params: {}, query: {}, body: undefined, granted: [] };
    if (route.beforeBody) await route.beforeBody(ctx);
    // The route's body limit holds for a tool's arguments too (the /mcp request has a larger one).
    const limit = bodyLimitOf(route, principal.type === 'anonymous');
    if (input.body !== undefined && Buffer.byteLength(JSON.stringify(input.body)) > limit) throw payloadTooLarge(limit);
    const query = Object.fromEntries(Object.entries(input.query ?? {}).filter(([, v]) => v !== undefined));
    Object.assign(ctx, validate(route, { params: input.params ?? {}, query, body: input.body }));
    if (route.access) ctx.granted = await this.gate.check(route.access, principal, ctx);
    const result = await route.handler(ctx as never);
    if (result === HANDLED) throw new Error(`${method.toUpperCase()} ${path} streams its answer and cannot be called in-process`);
    if (result instanceof Reply) return { status: result.status, body: result.body };
    return { status: result === undefined ? 204 : route.status ?? 200, body: result };
  }
}
