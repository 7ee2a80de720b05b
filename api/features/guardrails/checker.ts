import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { GuardrailCheckInput, GuardrailCheckResult, GuardrailVerdict } from '../../../workflows/messages';
import type { NotifiedChannel, NotifyOrgAlertChannels } from '../alert-channels/types';
import { writeAudit, type AuditActor } from '../audit/writer';
import type { Environment } from '../../domain/environments';
import type { FlagRef } from '../flags/types';
import { AUTO_ROLLBACK_DEFAULTS } from '../insights/impact';
import type { InsightsService } from '../insights/service';
import type { GuardResult, PrometheusGuard } from '../../domain/guards';
import { withGuards, type PrometheusGuards } from '../../lib/release-safety/prometheus-guards';

/** Who the guardrail's rollbacks and verdicts are recorded as. */
export const GUARDRAIL_ACTOR: AuditActor = { name: 'system:guardrail', userId: null };
/** The audit action of every verdict (docs/guardrails.md). */
export const GUARDRAIL_CHECKED = 'guardrail.checked';

interface WatchedFlag {
  key: string;
  service_id: string;
  environment: Environment;
  version: number;
  project_id: string;
  org_id: string;
  guardrail_auto_rollback: boolean;
  guardrail_guards: PrometheusGuard[];
  /** When the watched version was committed: the start of the guards' window. */
  changed_at: Date | null;
}

type RollbackAnswer = Awaited<ReturnType<InsightsService['autoRollback']>>;

/**
 * The check at the end of a guardrail watch: the auto-rollback endpoint's own decision
 * (InsightsService.autoRollback, its default limits) on the watched version only, a real run when
 * the project has guardrailAutoRollback and a dry run otherwise. Every verdict is written as a
 * `guardrail.checked` audit entry of the flag; a tripped check that did not roll back notifies the
 * organization's alert channels (a rollback notifies them itself). The project's Prometheus
 * guards are asked first (docs/guardrails.md#prometheus-guards): a breached guard trips the
 * change whatever the windows say; one that cannot be judged turns a pass into `waiting`.
 */
export class GuardrailChecker {
  constructor(private readonly deps: { sql: Sql; insights: InsightsService; notifyOrgAlertChannels: NotifyOrgAlertChannels; guards: PrometheusGuards; logger: Logger }) {}

  async check(input: GuardrailCheckInput): Promise<GuardrailCheckResult> {
    const [flag] = await this.deps.sql<WatchedFlag[]>`
      SELECT f.key, f.service_id, f.environment, f.version, f.project_id, p.org_id, p.guardrail_auto_rollback, p.guardrail_guards,
        (SELECT created_at FROM flag_versions v WHERE v.flag_id = f.id AND v.version = ${input.version}) AS changed_at
      FROM flags f JOIN projects p ON p.id = f.project_id WHERE f.id = ${input.flagId}`;
    // The audit trail of a deleted flag already says what happened to it.
    if (!flag) return { verdict: 'flag_deleted', reason: 'the flag was deleted before the check' };
    if (flag.version !== input.version) {
      if (await this.rolledBackBefore(input)) {
        // An earlier attempt of this check rolled back and then failed (say, writing its record).
        const reason = `version ${input.version} was rolled back by an earlier attempt of this check (version ${input.version + 1})`;
        await this.record(input, flag, { verdict: 'rolled_back', reason });
        return { verdict: 'rolled_back', reason };
      }
      const reason = `version ${input.version} was superseded by version ${flag.version}, which is judged instead when it is a watched change`;
      await this.record(input, flag, { verdict: 'superseded', reason });
      return { verdict: 'superseded', reason };
    }

    const ref: FlagRef = { key: flag.key, serviceId: flag.service_id, environment: flag.environment };
    const now = Date.now();
    const guards = await this.deps.guards.check(flag.guardrail_guards, {
      flagKey: flag.key,
      environment: flag.environment,
      serviceId: flag.service_id,
      startMs: flag.changed_at?.getTime() ?? now - input.windowMinutes * 60_000,
      endMs: now,
    });
    const guarded = withGuards<{ decision: 'pass' | 'fail' | 'wait'; reason: string }>({ decision: 'pass', reason: '' }, guards);
    const answer = await this.deps.insights.autoRollback(GUARDRAIL_ACTOR, flag.org_id, ref, {
      ...AUTO_ROLLBACK_DEFAULTS,
      windowMinutes: input.windowMinutes,
      dryRun: !flag.guardrail_auto_rollback,
      version: input.version,
      ...(guarded.decision === 'fail' ? { externalBreach: guarded.reason } : {}),
    });
    let result: GuardrailCheckResult = { verdict: verdictOf(answer), reason: answer.reason };
    // Never a pass while a guard could not be judged: the watch checks again (workflows/guardrail.ts).
    if (result.verdict === 'passed' && guarded.decision === 'wait') result = { verdict: 'waiting', reason: `${guarded.reason}; ${answer.reason}` };
    let notified = answer.alertNotifiedChannels;
    if (answer.actionTaken === 'would_roll_back') notified = await this.notifyTripped(input, flag, answer);
    else if (result.verdict === 'waiting' && input.lastCheck) notified = await this.notifyUnjudged(input, flag, result.reason);
    await this.record(input, flag, result, answer, notified, guards);
    return result;
  }

  private async rolledBackBefore(input: GuardrailCheckInput): Promise<boolean> {
    const [next] = await this.deps.sql<{ change_type: string; actor: string }[]>`
      SELECT change_type, actor FROM flag_versions WHERE flag_id = ${input.flagId} AND version = ${input.version + 1}`;
    return next?.change_type === 'rollback' && next.actor === GUARDRAIL_ACTOR.name;
  }

  /** Automatic rollback is off: the people on call decide, so they hear of it. */
  private notifyTripped(input: GuardrailCheckInput, flag: WatchedFlag, answer: RollbackAnswer): Promise<NotifiedChannel[]> {
    return this.notify(input, flag, {
      id: `guardrail-${input.flagId}-v${input.version}`,
      kind: 'flag.guardrail_tripped',
      title: `Flag "${flag.key}" tripped its guardrail (${flag.environment}); automatic rollback is off`,
      summary: `Version ${input.version} would be rolled back to version ${answer.targetVersionNumber}: ${answer.reason}`,
      severity: 'critical',
      timestamp: new Date().toISOString(),
      projectId: flag.project_id,
      serviceId: flag.service_id,
      environment: flag.environment,
      flagKey: flag.key,
      details: { version: input.version, targetVersionNumber: answer.targetVersionNumber, windowMinutes: input.windowMinutes, ...('delta' in answer ? { delta: answer.delta } : {}), limits: answer.limits },
    });
  }

  /** The watch ends without a verdict: the change was never judged healthy, and someone should look. */
  private notifyUnjudged(input: GuardrailCheckInput, flag: WatchedFlag, reason: string): Promise<NotifiedChannel[]> {
    return this.notify(input, flag, {
      id: `guardrail-${input.flagId}-v${input.version}-unjudged`,
      kind: 'flag.guardrail_unjudged',
      title: `Flag "${flag.key}": its guardrail could not judge the change (${flag.environment})`,
      summary: `Version ${input.version} was neither passed nor rolled back: ${reason}`,
      severity: 'warning',
      timestamp: new Date().toISOString(),
      projectId: flag.project_id,
      serviceId: flag.service_id,
      environment: flag.environment,
      flagKey: flag.key,
      details: { version: input.version, windowMinutes: input.windowMinutes },
    });
  }

  private async notify(input: GuardrailCheckInput, flag: WatchedFlag, alert: Parameters<NotifyOrgAlertChannels>[1]): Promise<NotifiedChannel[]> {
    try {
      return await this.deps.notifyOrgAlertChannels(flag.org_id, alert);
    } catch (error) {
      // The verdict still gets recorded; the audit entry says no channel was notified.
      this.deps.logger.error({ err: error, flagId: input.flagId }, 'guardrail alert notification failed');
      return [];
    }
  }

  private async record(input: GuardrailCheckInput, flag: WatchedFlag, result: GuardrailCheckResult, answer?: RollbackAnswer, notified: NotifiedChannel[] = [], guards: GuardResult[] = []) {
    const judged = answer && 'delta' in answer ? { before: answer.before, after: answer.after, delta: answer.delta } : {};
    await this.deps.sql.begin((tx) =>
      writeAudit(tx, GUARDRAIL_ACTOR, {
        projectId: flag.project_id,
        action: GUARDRAIL_CHECKED,
        resourceType: 'flag',
        resourceId: input.flagId,
        resourceName: flag.key,
        metadata: {
          serviceId: flag.service_id,
          environment: flag.environment,
          version: input.version,
          windowMinutes: input.windowMinutes,
          autoRollbackEnabled: flag.guardrail_auto_rollback,
          verdict: result.verdict,
          reason: result.reason,
          ...(answer ? { actionTaken: answer.actionTaken, tripped: answer.tripped, limits: answer.limits, targetVersionNumber: answer.targetVersionNumber } : {}),
          ...(answer && 'newVersionNumber' in answer ? { newVersionNumber: answer.newVersionNumber } : {}),
          ...judged,
          ...(guards.length ? { guards } : {}),
          alertNotifiedChannels: notified,
        },
      }),
    );
  }
}

function verdictOf(answer: RollbackAnswer): GuardrailVerdict {
  if (answer.actionTaken === 'rolled_back') return 'rolled_back';
  if (answer.tripped) return 'tripped';
  // Judged nothing: the flag moved on between the version check and the decision.
  if (answer.change === null) return 'superseded';
  return 'passed';
}
