import { z, type ZodError, type ZodType, type ZodTypeDef } from 'zod';
import type { ProjectAccess } from '../../auth/access';
import type { Capability } from '../../auth/permissions';
import type { Principal } from '../../auth/principal';
import { EnvironmentSchema, type Environment } from '../../domain/environments';
import { HttpError, notFound, type FieldProblem } from '../../http/errors';
import type { Logger } from '../../infra/logger';
import type { AuditActor } from '../audit/writer';
import { FieldProblemsSchema, FlagCreateSchema, FlagPatchSchema, FlagResponseSchema } from './schema';
import type { FlagService } from './service';
import type { FlagRecord } from './types';

/** Items per bulk request, and on demo services (docs/limits.md). */
export const BULK_MAX_ITEMS = 100;
export const BULK_DEMO_MAX_ITEMS = 4096;

export const BulkItemResultSchema = z.object({
  index: z.number().int().describe("Position in the request's flags array"),
  key: z.string().nullable(),
  status: z.enum(['success', 'failure']),
  /** Created or updated: the flag after the change (create: the requested or development copy). */
  flag: FlagResponseSchema.optional(),
  /** Failure: what went wrong, with the HTTP status the same change would get on its own. */
  error: z.string().optional(),
  statusCode: z.number().int().optional().describe('The HTTP status this item alone would have got'),
  details: FieldProblemsSchema.optional(),
});
export type BulkItemResult = z.infer<typeof BulkItemResultSchema>;

export const BulkOutcomeSchema = z.object({
  success: z.boolean(),
  total: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
  results: z.array(BulkItemResultSchema),
});
export type BulkOutcome = z.infer<typeof BulkOutcomeSchema>;

const FlagRefShape = {
  key: z.string().min(1).max(256),
  serviceId: z.string().min(1).max(200),
  environment: EnvironmentSchema.default('development').describe('Defaults to development'),
};

export const BulkUpdateItemSchema = z.object({ ...FlagRefShape, updates: FlagPatchSchema }).strict();
export const BulkDeleteItemSchema = z
  .object({ ...FlagRefShape, version: z.number().int().positive().optional().describe('Expected current version; a stale one fails the item with 409') })
  .strict();
/**
 * Demo writes apply `updates.enabled` only: every other field of the item or of `updates` is
 * ignored (docs/api-reference.md#demo-service).
 */
export const DemoUpdateItemSchema = z
  .object({
    ...FlagRefShape,
    updates: z.object({ enabled: z.boolean({ required_error: 'demo writes change only enabled: give updates.enabled' }) }).passthrough(),
  })
  .passthrough();

type BulkUpdateItem = z.infer<typeof BulkUpdateItemSchema>;
type BulkDeleteItem = z.infer<typeof BulkDeleteItemSchema>;
type BulkCreateItem = z.infer<typeof FlagCreateSchema>;

/** One (service, environment) of a demo write, ready to apply. */
export interface DemoWriteGroup {
  serviceId: string;
  environment: Environment;
  items: { index: number; key: string; enabled: boolean }[];
}

export interface DemoWritePlan {
  groups: DemoWriteGroup[];
  /** Items refused before any write (invalid shape). */
  failures: BulkItemResult[];
  total: number;
}

export interface BulkFlagDeps {
  flags: FlagService;
  access: ProjectAccess;
  logger: Logger;
  /** Called with the written flags after a demo write committed (the demo list updates its cached grid at once). */
  afterDemoWrite?: (flags: FlagRecord[]) => void;
}

/**
 * Bulk create, update and delete (docs/api-reference.md#flags). Every item is its own FlagService
 * call (its own transaction: row, snapshot, audit, outbox event), so items succeed or fail
 * independently and a failure never undoes another item. Items run in request order, so a later
 * item sees an earlier one's effect. Authorization is per item, on the item's service's project; an
 * item for a service the caller cannot see fails exactly like one for a service that does not
 * exist.
 */
export class BulkFlagOperations {
  constructor(private readonly deps: BulkFlagDeps) {}

  create(principal: Principal, actor: AuditActor, items: unknown[]): Promise<BulkItemResult[]> {
    return this.run(principal, 'flags:write', items, FlagCreateSchema, async (item: BulkCreateItem) => {
      const created = await this.deps.flags.create(actor, item, { metadata: { via: 'bulk' } });
      return created.find((f) => f.environment === (item.environment ?? 'development')) ?? created[0];
    });
  }

  update(principal: Principal, actor: AuditActor, items: unknown[]): Promise<BulkItemResult[]> {
    return this.run(principal, 'flags:write', items, BulkUpdateItemSchema, (item: BulkUpdateItem) => {
      const { version, ...patch } = item.updates;
      return this.deps.flags.update(actor, { key: item.key, serviceId: item.serviceId, environment: item.environment }, patch, version, {
        metadata: { via: 'bulk' },
      });
    });
  }

  remove(principal: Principal, actor: AuditActor, items: unknown[]): Promise<BulkItemResult[]> {
    return this.run(principal, 'flags:delete', items, BulkDeleteItemSchema, async (item: BulkDeleteItem) => {
      await this.deps.flags.remove(actor, { key: item.key, serviceId: item.serviceId, environment: item.environment }, item.version, {
        metadata: { via: 'bulk' },
      });
      return undefined;
    });
  }

  /** Validates a demo write and groups it by (service, environment); nothing is written yet. */
  planDemoWrite(items: unknown[]): DemoWritePlan {
    const failures: BulkItemResult[] = [];
    const groups = new Map<string, DemoWriteGroup>();
    items.forEach((raw, index) => {
      const parsed = DemoUpdateItemSchema.safeParse(raw);
      if (!parsed.success) {
        failures.push(failure(index, keyOf(raw), validationError(parsed.error)));
        return;
      }
      const { serviceId, environment, key, updates } = parsed.data;
      const scope = `${serviceId}\u0000${environment}`;
      let group = groups.get(scope);
      if (!group) groups.set(scope, (group = { serviceId, environment, items: [] }));
      group.items.push({ index, key, enabled: updates.enabled });
    });
    return { groups: [...groups.values()], failures, total: items.length };
  }

  /**
   * Applies a demo write: one transaction per (service, environment) through
   * FlagService.setEnabledMany. A key given twice in one group takes its last value.
   */
  async applyDemoWrite(actor: AuditActor, plan: DemoWritePlan): Promise<BulkItemResult[]> {
    const results = [...plan.failures];
    for (const group of plan.groups) {
      try {
        const flags = await this.deps.flags.setEnabledMany(
          actor,
          { serviceId: group.serviceId, environment: group.environment },
          group.items.map(({ key, enabled }) => ({ key, enabled })),
          { metadata: { via: 'bulk', demo: true } },
        );
        const answered = new Map((await this.deps.flags.respond([...flags.values()])).map((flag) => [flag.key, flag]));
        for (const item of group.items) {
          const flag = answered.get(item.key);
          results.push(flag ? { index: item.index, key: item.key, status: 'success', flag } : failure(item.index, item.key, notFound(`Flag "${item.key}"`)));
        }
        this.deps.afterDemoWrite?.([...flags.values()]);
      } catch (error) {
        const reason = this.asHttpError(error);
        for (const item of group.items) results.push(failure(item.index, item.key, reason));
      }
    }
    return results.sort((a, b) => a.index - b.index);
  }

  private async run<T extends { serviceId: string }>(
    principal: Principal,
    capability: Capability,
    items: unknown[],
    schema: ZodType<T, ZodTypeDef, unknown>,
    apply: (item: T) => Promise<FlagRecord | undefined>,
  ): Promise<BulkItemResult[]> {
    const authorize = this.authorizer(principal, capability);
    const results: BulkItemResult[] = [];
    for (let index = 0; index < items.length; index++) {
      const raw = items[index];
      const parsed = schema.safeParse(raw);
      if (!parsed.success) {
        results.push(failure(index, keyOf(raw), validationError(parsed.error)));
        continue;
      }
      try {
        await authorize(parsed.data.serviceId);
        const flag = await apply(parsed.data);
        const [answered] = flag ? await this.deps.flags.respond([flag]) : [];
        results.push({ index, key: keyOf(raw), status: 'success', ...(answered ? { flag: answered } : {}) });
      } catch (error) {
        results.push(failure(index, keyOf(raw), this.asHttpError(error)));
      }
    }
    return results;
  }

  /** The flags routes' rule, remembered per service for the request (100 items, one lookup). */
  private authorizer(principal: Principal, capability: Capability) {
    const decided = new Map<string, Promise<void>>();
    return (serviceId: string): Promise<void> => {
      let decision = decided.get(serviceId);
      if (!decision) {
        decision = this.deps.access.requireOnService(principal, serviceId, capability).then(() => undefined);
        decision.catch(() => undefined);
        decided.set(serviceId, decision);
      }
      return decision;
    };
  }

  private asHttpError(error: unknown): HttpError {
    if (error instanceof HttpError) return error;
    this.deps.logger.error({ err: error }, 'bulk flag item failed');
    return new HttpError(500, 'Internal server error');
  }
}

/**
 * The response status of a bulk request (docs/api-reference.md#flags): `allSucceeded` (201 create,
 * 200 otherwise) when nothing failed, 207 when results are mixed. When every item failed there is
 * nothing multi-status about it: the status all items share (403, 404, 409 …), or 400 when they
 * differ.
 */
export function bulkStatus(results: BulkItemResult[], allSucceeded: number): number {
  const failures = results.filter((r) => r.status === 'failure');
  if (failures.length === 0) return allSucceeded;
  if (failures.length < results.length) return 207;
  const statuses = new Set(failures.map((r) => r.statusCode ?? 400));
  return statuses.size === 1 ? [...statuses][0] : 400;
}

export function summarize(results: BulkItemResult[]): BulkOutcome {
  const failed = results.filter((r) => r.status === 'failure').length;
  return { success: failed === 0, total: results.length, succeeded: results.length - failed, failed, results };
}

function failure(index: number, key: string | null, error: HttpError): BulkItemResult {
  const details = error.extra.details as FieldProblem[] | undefined;
  return { index, key, status: 'failure', error: error.message, statusCode: error.status, ...(details ? { details } : {}) };
}

function validationError(error: ZodError): HttpError {
  const details = error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message }));
  return new HttpError(400, `Validation failed: ${details.map((d) => (d.path ? `${d.path}: ${d.message}` : d.message)).join('; ')}`, { details });
}

function keyOf(raw: unknown): string | null {
  const key = raw && typeof raw === 'object' ? (raw as { key?: unknown }).key : undefined;
  return typeof key === 'string' ? key : null;
}

/** The serviceId an item names, when it names one. */
export function serviceIdOf(raw: unknown): string | undefined {
  const id = raw && typeof raw === 'object' ? (raw as { serviceId?: unknown }).serviceId : undefined;
  return typeof id === 'string' ? id : undefined;
}
