import { randomBytes } from 'node:crypto';
import type { Response } from 'express';
import { actingUser } from '../../auth/principal';
import { notFound } from '../../http/errors';
import type { RateLimiter } from '../../http/rate-limit';
import { newId, sha256Hex } from '../../infra/ids';
import type { Sql } from '../../infra/postgres';
import { actorFromPrincipal, writeAudit } from '../audit/writer';
import type { FlagService } from '../flags/service';
import type { Environment } from '../../domain/environments';
import type { FlagRecord, FlagRef } from '../flags/types';
import type { Caller } from '../projects/common';
import type { TriggerStore } from './store';
import { TRIGGER_RATE_LIMIT, type TriggerAction, type TriggerRecord } from './types';

export interface TriggerServiceDeps {
  sql: Sql;
  store: TriggerStore;
  flags: Pick<FlagService, 'get' | 'toggle'>;
  /** A limiter whose window is one minute (docs/limits.md: 30 executions per minute per token). */
  limiter: RateLimiter;
  publicBaseUrl: string;
}

export interface TriggerExecution {
  success: true;
  triggerId: string;
  action: TriggerAction;
  /** False when the flag already was in the requested state (nothing written). */
  changed: boolean;
  flag: Pick<FlagRecord, 'key' | 'serviceId' | 'environment' | 'enabled' | 'version' | 'updatedAt'>;
}

const TOKEN_PREFIX = 'fgt_';
/** 32 random bytes, base64url. Anything else cannot be a token and is not looked up. */
const TOKEN_PATTERN = /^fgt_[A-Za-z0-9_-]{43}$/;

/**
 * Flag triggers (docs/api-reference.md#triggers): capability URLs that enable, disable or toggle
 * one flag in one environment. The raw token is shown once; only its SHA-256 is stored. Executions
 * go through FlagService like every other write (version snapshot, audit as `trigger:<name>`,
 * outbox event for streams, caches and webhooks).
 */
export class TriggerService {
  constructor(private readonly deps: TriggerServiceDeps) {}

  /** `projectId`: the project of the flag's service, where the route's rule granted flags:write. */
  async create(caller: Caller, projectId: string, ref: FlagRef, input: { name: string; action: TriggerAction }): Promise<TriggerRecord & { url: string; token: string }> {
    const flag = await this.deps.flags.get(ref);
    if (!flag) throw notFound(`Flag "${ref.key}"`);
    const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    const actor = actorFromPrincipal(caller.principal, caller);
    const trigger = await this.deps.sql.begin(async (tx) => {
      const created = await this.deps.store.insert(tx, {
        id: newId('trg'),
        flagId: flag.id,
        projectId,
        serviceId: flag.serviceId,
        environment: flag.environment,
        flagKey: flag.key,
        name: input.name,
        action: input.action,
        tokenHash: sha256Hex(token),
        createdBy: actingUser(caller.principal)?.id ?? (caller.principal.type === 'project_api_token' ? caller.principal.createdBy : null),
        createdByActor: actor.name,
      });
      await writeAudit(tx, actor, {
        projectId,
        action: 'trigger.create',
        resourceType: 'trigger',
        resourceId: created.id,
        resourceName: created.name,
        after: created,
        metadata: { flagKey: flag.key, serviceId: flag.serviceId, environment: flag.environment },
      });
      return created;
    });
    return { ...trigger, url: this.urlFor(token), token };
  }

  async list(serviceId: string, flagKey: string, environment?: Environment): Promise<TriggerRecord[]> {
    return this.deps.store.listActive(this.deps.sql, serviceId, flagKey, environment);
  }

  /** The active triggers of all a service's flags, at most `limit` (one more is read to tell whether there are more). */
  async listInService(serviceId: string, limit: number): Promise<{ triggers: TriggerRecord[]; hasMore: boolean }> {
    const found = await this.deps.store.listActiveInService(this.deps.sql, serviceId, limit + 1);
    return { triggers: found.slice(0, limit), hasMore: found.length > limit };
  }

  /** Revokes at once: the URL answers 404 from now on. The record stays for the audit trail. */
  async revoke(caller: Caller, projectId: string, serviceId: string, flagKey: string, triggerId: string): Promise<void> {
    await this.deps.sql.begin(async (tx) => {
      const current = await this.deps.store.findById(tx, triggerId, { forUpdate: true });
      if (!current || current.serviceId !== serviceId || current.flagKey !== flagKey || current.revokedAt) throw notFound('Trigger');
      const revoked = await this.deps.store.revoke(tx, triggerId);
      await writeAudit(tx, actorFromPrincipal(caller.principal, caller), {
        projectId,
        action: 'trigger.revoke',
        resourceType: 'trigger',
        resourceId: triggerId,
        resourceName: current.name,
        before: current,
        after: revoked,
        metadata: { flagKey, serviceId, environment: current.environment },
      });
    });
  }

  /** POST /api/triggers/{token}: no credentials, the token is the capability. */
  async execute(token: string, client: { ip: string; userAgent: string; res: Response }): Promise<TriggerExecution> {
    const tokenHash = sha256Hex(token);
    // Counted per token before the lookup, so guessing costs a rate-limited request too.
    await this.deps.limiter.enforce(client.res, `trigger:${tokenHash}`, TRIGGER_RATE_LIMIT, 'trigger');
    const trigger = TOKEN_PATTERN.test(token) ? await this.deps.store.findActiveByTokenHash(this.deps.sql, tokenHash) : null;
    if (!trigger) throw notFound('Trigger');
    const ref: FlagRef = { key: trigger.flagKey, serviceId: trigger.serviceId, environment: trigger.environment };
    const before = await this.deps.flags.get(ref);
    if (!before) throw notFound('Trigger');
    const enabled = trigger.action === 'enable' ? true : trigger.action === 'disable' ? false : undefined;
    const actor = { name: `trigger:${trigger.name}`, userId: null, ipAddress: client.ip, userAgent: client.userAgent };
    const after = await this.deps.flags.toggle(actor, ref, enabled, undefined, {
      metadata: { triggerId: trigger.id, triggerName: trigger.name, triggerAction: trigger.action },
    });
    await this.deps.store.markExecuted(this.deps.sql, trigger.id);
    return {
      success: true,
      triggerId: trigger.id,
      action: trigger.action,
      changed: after.version !== before.version,
      flag: { key: after.key, serviceId: after.serviceId, environment: after.environment, enabled: after.enabled, version: after.version, updatedAt: after.updatedAt },
    };
  }

  private urlFor(token: string): string {
    return `${this.deps.publicBaseUrl.replace(/\/+$/, '')}/api/triggers/${token}`;
  }
}
