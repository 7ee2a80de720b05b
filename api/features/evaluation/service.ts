import { performance } from 'node:perf_hooks';
import type { Principal } from '../../auth/principal';
import { PER_SERVICE, enforceDecision, type RateDecision } from '../../http/rate-limit';
import type { RequestContext } from '../../http/route';
import { ENVIRONMENTS, type Environment } from '../../domain/environments';
import { canSee, type EvaluationAccess, type ServiceGrant } from './access';
import type { ContextRing } from './contexts';
import { EvaluationBudget, evaluate, type EvaluationContext, type EvaluationResult, type FlagType } from './engine/index';
import type { EvaluationMetrics } from '../../lib/metrics/metrics';
import type { LocalRateLimiter } from './local-rate-limiter';
import type { EvaluationRecorder, EvaluationSource } from './recorder';
import type { EnvironmentSnapshot } from './snapshots';

/** Where and how an evaluation request arrived: everything recording and `_debug` need. */
export interface CallInfo {
  source: EvaluationSource;
  /** performance.now() when the request arrived. */
  startedAt: number;
  /** Request body size, for the context ring's byte budget. */
  bodyBytes: number;
}

export interface FlagRequest {
  flagKey: string;
  defaultValue?: unknown;
}

export const DEFAULT_ENVIRONMENT: Environment = 'development';

export function isEnvironment(value: unknown): value is Environment {
  return typeof value === 'string' && (ENVIRONMENTS as readonly string[]).includes(value);
}

/**
 * Evaluation over snapshots, shared by every protocol adapter (REST and OFREP in rest.ts and
 * ofrep.ts, Connect and gRPC-Web in connect-*.ts, SSE grants in sse.ts). Reads memory only;
 * each result is handed to the recorder and the context ring, which never make the caller wait.
 */
export class EvaluationService {
  constructor(
    private readonly deps: {
      access: EvaluationAccess;
      recorder: EvaluationRecorder;
      contexts: ContextRing;
      limiter: LocalRateLimiter;
      /** Evaluations by protocol, reason and error type, and request durations. */
      metrics: EvaluationMetrics;
      perServiceLimit: number;
      /** Work one request may do (engine/budget.ts): condition units and milliseconds of `matches`. */
      workBudget: { conditions: number; regexMs: number };
    },
  ) {}

  /** A fresh work budget: one per request, shared by every flag it evaluates. */
  private budget(): EvaluationBudget {
    return new EvaluationBudget(this.deps.workBudget, clock);
  }

  grant(principal: Principal, serviceId: string): Promise<ServiceGrant> {
    return this.deps.access.grant(principal, serviceId);
  }

  grantNow(principal: Principal, serviceId: string): ServiceGrant | undefined {
    return this.deps.access.grantNow(principal, serviceId);
  }

  /**
   * 10,000 evaluation requests per minute per service (docs/limits.md#rate-limits) (shared by every
   * replica), spent only by callers who read the service (`grant.reader`); undefined for anyone
   * else, whom the per-IP limit holds, so anonymous callers cannot use up a tenant's budget.
   */
  consumeServiceBudget(grant: ServiceGrant): RateDecision | undefined {
    return grant.reader ? this.deps.limiter.consume(PER_SERVICE.bucket(grant.service.id), this.deps.perServiceLimit) : undefined;
  }

  /**
   * Throws the grant's denial when the caller may not see one of the keys
   * (docs/data-plane.md#who-may-evaluate-accessts).
   */
  checkVisible(grant: ServiceGrant, environment: Environment, keys: Iterable<string>): void {
    if (grant.visibility === 'all') return;
    const env = grant.service.environments[environment];
    for (const key of keys) {
      if (!canSee(grant, env.get(key)?.record.isPublic)) throw grant.denial();
    }
  }

  /** Evaluates named flags for one context (single, batch, typed Connect methods). */
  evaluateKeys(
    grant: ServiceGrant,
    environment: Environment,
    flags: readonly FlagRequest[],
    context: EvaluationContext,
    call: CallInfo,
    expectedType?: FlagType,
  ): EvaluationResult[] {
    const env = grant.service.environments[environment];
    const opts = { expectedType, budget: this.budget() };
    const results: EvaluationResult[] = new Array(flags.length);
    for (let i = 0; i < flags.length; i++) {
      const f = flags[i];
      results[i] = evaluate(env.get(f.flagKey)?.compiled, f.flagKey, context, f.defaultValue, opts);
    }
    this.record(grant, env, results, context, call);
    return results;
  }

  /** Evaluates every flag the caller may see (OFREP bulk, ResolveAll). */
  evaluateVisible(grant: ServiceGrant, environment: Environment, context: EvaluationContext, call: CallInfo): EvaluationResult[] {
    const env = grant.service.environments[environment];
    const results: EvaluationResult[] = [];
    const opts = { budget: this.budget() };
    for (const entry of env.visible(grant.visibility)) {
      results.push(evaluate(entry.compiled, entry.record.key, context, undefined, opts));
    }
    this.record(grant, env, results, context, call);
    return results;
  }

  private record(grant: ServiceGrant, env: EnvironmentSnapshot, results: EvaluationResult[], context: EvaluationContext, call: CallInfo) {
    const now = Date.now();
    const latencyMs = performance.now() - call.startedAt;
    const rawKey = typeof context === 'object' && context !== null ? context.targetingKey : undefined;
    const targetingKey = typeof rawKey === 'string' && rawKey.length > 0 ? rawKey : undefined;
    const { service } = grant;
    this.deps.metrics.observe(call.source, results, latencyMs / 1000);
    this.deps.recorder.recordRequest({
      timestamp: now,
      projectId: service.projectId,
      serviceId: service.id,
      environment: env.environment,
      source: call.source,
      targetingKey,
      latencyMs,
      results,
    });
    if (targetingKey !== undefined && results.length > 0 && this.deps.contexts.takes(now)) {
      this.deps.contexts.push({
        at: now,
        serviceId: service.id,
        environment: env.environment,
        targetingKey,
        context,
        results,
        bytes: call.bodyBytes,
      });
    }
  }
}

const clock = () => performance.now();

/** The per-service budget on an Express route (only callers who read the service spend it). */
export function spendOrThrow(evaluation: EvaluationService, ctx: RequestContext<unknown, unknown, unknown>, grant: ServiceGrant) {
  const decision = evaluation.consumeServiceBudget(grant);
  if (decision !== undefined) enforceDecision(ctx.res, decision, 'Rate limit exceeded for this service');
}
