import { HttpError, notFound } from '../../http/errors';
import type { Logger } from '../../infra/logger';
import type { Sql } from '../../infra/postgres';
import type { NotifiedChannel, NotifyOrgAlertChannels } from '../alert-channels/types';
import type { AuditActor } from '../audit/writer';
import type { FlagService } from '../flags/service';
import type { Environment } from '../../domain/environments';
import type { FlagRecord, FlagRef } from '../flags/types';
import { ALERT_BASELINE_MINUTES, ALERT_WINDOW_MINUTES, evaluateAlerts, type AlertEntry } from './alerts';
import type { FlagChangeHistory, ToggleEntry } from './changes';
import { degradationIssues, HEALTH_WINDOW_MINUTES, healthScore, levelOf } from './health';
import { compareWindows, impactVerdict, rateOf, rollbackDecision, round, windowSummary } from './impact';
import { staleReportItem, staleSummary } from './stale';
import type { EvaluationStats, EvaluationWarehouse, FlagScope } from './warehouse';
import { aroundChange, floorMinute, HEATMAP_BUCKET_MINUTES, MINUTE_MS, rangeBody, rangeWindow, type MinuteWindow, type RangeLabel, type TimeSpan } from './window';

export interface InsightsServiceDeps {
  sql: Sql;
  warehouse: EvaluationWarehouse;
  changes: FlagChangeHistory;
  flags: FlagService;
  notifyOrgAlertChannels: NotifyOrgAlertChannels;
  logger: Logger;
  now?: () => number;
}

/** Toggles listed in `recentToggles`. */
const RECENT_TOGGLES = 20;
/** Flags shown in a heatmap (the busiest). */
const HEATMAP_MAX_FLAGS = 100;
/** Where the numbers come from (the `source` field): the per-minute rollup; see warehouse.ts for the raw reads. */
const SOURCE = 'evaluation_minutes';

export interface RollbackOptions {
  dryRun: boolean;
  maxErrorRateDelta: number;
  maxLatencyDeltaMs: number;
  windowMinutes: number;
  /** Judge only this version (the production guardrail's watch): a flag that moved on is left alone. */
  version?: number;
  /** A breached Prometheus guard of the guardrail (docs/guardrails.md#prometheus-guards): trips the change whatever the windows say. */
  externalBreach?: string;
}

const latency = (n: number | null) => (n === null ? null : round(n));

/**
 * Flag insights (docs/insights.md): answers from the warehouse and
 * the flags' version history. Authorization is the routes' job; auto-rollback writes through the
 * one flag write path (FlagService.rollback) and notifies through the alert channels' delivery.
 */
export class InsightsService {
  private readonly now: () => number;

  constructor(private readonly deps: InsightsServiceDeps) {
    this.now = deps.now ?? Date.now;
  }

  async metrics(ref: FlagRef, range: RangeLabel, windowMinutes: number) {
    const flag = await this.requireFlag(ref);
    const scope = scopeOf(flag);
    const nowMs = this.now();
    const window = rangeWindow(range, nowMs);
    const { warehouse } = this.deps;
    const [{ total, buckets }, breakdowns, realtime, toggles] = await Promise.all([
      warehouse.flagSeries(scope, window, window.bucketMinutes),
      warehouse.flagBreakdowns(scope, window),
      warehouse.flagRealtime(scope, nowMs, window.startMs),
      this.deps.changes.toggles(this.deps.sql, flag.id, flag.environment, window.startMs, nowMs, RECENT_TOGGLES),
    ]);
    const timeSeries = [];
    for (let at = window.startMs; at < window.endMs; at += window.bucketMinutes * MINUTE_MS) {
      timeSeries.push({ timestamp: new Date(at).toISOString(), ...seriesPoint(buckets.get(at)) });
    }
    return {
      flagKey: flag.key,
      serviceId: flag.serviceId,
      environment: flag.environment,
      source: SOURCE,
      range: rangeBody(window),
      bucketMinutes: window.bucketMinutes,
      summary: {
        totalEvaluations: total.evaluations,
        totalErrors: total.errors,
        errorRate: round(rateOf(total.errors, total.evaluations), 6),
        evaluationErrors: total.evaluationErrors,
        avgLatencyMs: total.evaluations ? round(total.latencySumMs / total.evaluations) : null,
        p50LatencyMs: latency(total.p50LatencyMs),
        p95LatencyMs: latency(total.p95LatencyMs),
        p99LatencyMs: latency(total.p99LatencyMs),
        evaluationsPerMinute: round(total.evaluations / window.minutes, 3),
        evaluationsPerSecond: round(total.evaluations / (window.minutes * 60), 4),
      },
      realtime: {
        evaluationsPerSecond: round(realtime.lastMinute / 60, 3),
        evaluationsPerMinute: round(realtime.last5Min / 5, 2),
        evaluationsLastMinute: realtime.lastMinute,
        evaluationsLast5Min: realtime.last5Min,
        errorRateLastMinute: round(rateOf(realtime.errorsLastMinute, realtime.lastMinute), 6),
        evaluationErrorsLastMinute: realtime.evaluationErrorsLastMinute,
        trend: trendOf(realtime.last5Min, realtime.previous5Min),
        lastEvaluatedAt: realtime.lastEvaluatedAtMs === null ? null : new Date(realtime.lastEvaluatedAtMs).toISOString(),
        topReason: realtime.topReason,
      },
      toggleImpact: await this.impactOf(scope, toggles[0], windowMinutes),
      recentToggles: toggles,
      reasonBreakdown: breakdowns.reasons,
      valueBreakdown: breakdowns.values,
      timeSeries,
    };
  }

  async toggleImpact(ref: FlagRef, range: RangeLabel, windowMinutes: number) {
    const flag = await this.requireFlag(ref);
    const nowMs = this.now();
    const window = rangeWindow(range, nowMs);
    const toggles = await this.deps.changes.toggles(this.deps.sql, flag.id, flag.environment, window.startMs, nowMs, RECENT_TOGGLES);
    return {
      flagKey: flag.key,
      serviceId: flag.serviceId,
      environment: flag.environment,
      range: rangeBody(window),
      impact: await this.impactOf(scopeOf(flag), toggles[0], windowMinutes),
      recentToggles: toggles,
    };
  }

  /**
   * Judges the flag's latest change on the windows around it; when tripped and not a dry run,
   * restores the version before it and notifies the organization's alert channels.
   */
  async autoRollback(actor: AuditActor, orgId: string, ref: FlagRef, opts: RollbackOptions) {
    const flag = await this.requireFlag(ref);
    const base = { flagKey: flag.key, serviceId: flag.serviceId, environment: flag.environment, dryRun: opts.dryRun, windowMinutes: opts.windowMinutes };
    const limits = { maxErrorRateDelta: opts.maxErrorRateDelta, maxLatencyDeltaMs: opts.maxLatencyDeltaMs };
    const change = await this.deps.changes.latestChange(this.deps.sql, flag.id);
    if (opts.version !== undefined && change?.version !== opts.version) {
      return {
        ...base,
        actionTaken: 'none',
        reason: `version ${opts.version} is no longer the latest (now ${change?.version ?? 'none'}): the newer change is judged instead`,
        tripped: false,
        targetVersionNumber: null,
        alertNotifiedChannels: [] as NotifiedChannel[],
        limits,
        change: null,
      };
    }
    if (!change || change.version <= 1) {
      return {
        ...base,
        actionTaken: 'none',
        reason: 'the flag has no earlier version to roll back to',
        tripped: false,
        targetVersionNumber: null,
        alertNotifiedChannels: [] as NotifiedChannel[],
        limits,
        change: null,
      };
    }
    const windows = aroundChange(change.atMs, opts.windowMinutes);
    const [before, after] = await this.summaries(scopeOf(flag), windows);
    const delta = compareWindows(before, after);
    const windowsDecision = rollbackDecision(before, after, delta, limits);
    const decision = opts.externalBreach
      ? { tripped: true, reason: windowsDecision.tripped ? `${opts.externalBreach}; ${windowsDecision.reason}` : opts.externalBreach }
      : windowsDecision;
    const targetVersionNumber = change.version - 1;
    const judged = {
      limits,
      change: { version: change.version, changeType: change.changeType, actor: change.actor, timestamp: new Date(change.atMs).toISOString() },
      before: { ...before, ...windowBody(windows.before) },
      after: { ...after, ...windowBody(windows.after) },
      delta,
    };
    // Undoing a rollback would bring back the version it removed: that is a person's call.
    if (change.changeType === 'rollback') {
      return {
        ...base,
        actionTaken: 'none',
        reason: `the latest change (version ${change.version}) is a rollback, which auto-rollback never undoes; its windows: ${decision.reason}`,
        tripped: decision.tripped,
        targetVersionNumber,
        alertNotifiedChannels: [] as NotifiedChannel[],
        ...judged,
      };
    }
    if (!decision.tripped || opts.dryRun) {
      return {
        ...base,
        actionTaken: decision.tripped ? 'would_roll_back' : 'none',
        reason: decision.tripped ? `dry run; a real run would roll back to version ${targetVersionNumber}: ${decision.reason}` : decision.reason,
        tripped: decision.tripped,
        targetVersionNumber,
        alertNotifiedChannels: [] as NotifiedChannel[],
        ...judged,
      };
    }

    let rolledBack: FlagRecord;
    try {
      rolledBack = await this.deps.flags.rollback(actor, ref, targetVersionNumber, {
        // Only the version that was judged: a change made meanwhile is never rolled over unjudged.
        expectedVersion: change.version,
        permit: 'release-safety',
        metadata: { autoRollback: { fromVersion: change.version, reason: decision.reason, before, after, delta, limits } },
      });
    } catch (error) {
      if (!(error instanceof HttpError && error.status === 409)) throw error;
      return {
        ...base,
        actionTaken: 'none',
        reason: `the flag changed while version ${change.version} was being judged; nothing was rolled back (judge the new version again)`,
        tripped: decision.tripped,
        targetVersionNumber,
        alertNotifiedChannels: [] as NotifiedChannel[],
        ...judged,
      };
    }
    let alertNotifiedChannels: NotifiedChannel[] = [];
    let alertError: string | undefined;
    try {
      alertNotifiedChannels = await this.deps.notifyOrgAlertChannels(orgId, {
        id: `auto-rollback-${flag.id}-v${rolledBack.version}`,
        kind: 'flag.auto_rollback',
        title: `Flag "${flag.key}" rolled back automatically (${flag.environment})`,
        summary: `Version ${change.version} was rolled back to version ${targetVersionNumber}: ${decision.reason}.`,
        severity: 'critical',
        timestamp: new Date(this.now()).toISOString(),
        projectId: flag.projectId,
        serviceId: flag.serviceId,
        environment: flag.environment,
        flagKey: flag.key,
        details: { fromVersion: change.version, targetVersionNumber, newVersion: rolledBack.version, delta, limits },
      });
    } catch (error) {
      // The rollback is committed: report the failed notification rather than fail the request.
      this.deps.logger.error({ err: error, flagId: flag.id }, 'auto-rollback alert notification failed');
      alertError = 'the alert channels could not be notified';
    }
    return {
      ...base,
      actionTaken: 'rolled_back',
      reason: decision.reason,
      tripped: true,
      targetVersionNumber,
      newVersionNumber: rolledBack.version,
      alertNotifiedChannels,
      ...(alertError ? { alertError } : {}),
      ...judged,
    };
  }

  async staleFlags(projectId: string) {
    const nowMs = this.now();
    const [flags, activity] = await Promise.all([this.projectFlags(projectId), this.deps.warehouse.projectActivity(projectId)]);
    const lastSeen = new Map(activity.map((a) => [`${a.serviceId}\u0000${a.environment}\u0000${a.flagKey}`, a.lastEvaluatedAtMs]));
    const reports = flags
      .map((f) => staleReportItem(f, lastSeen.get(`${f.serviceId}\u0000${f.environment}\u0000${f.key}`) ?? null, nowMs))
      .sort((a, b) => b.stalenessScore - a.stalenessScore || a.flagKey.localeCompare(b.flagKey) || a.environment.localeCompare(b.environment));
    return { projectId, generatedAt: new Date(nowMs).toISOString(), ...staleSummary(reports), reports };
  }

  async health(projectId: string) {
    const nowMs = this.now();
    const endMs = floorMinute(nowMs) + MINUTE_MS;
    const current: MinuteWindow = { startMs: endMs - HEALTH_WINDOW_MINUTES * MINUTE_MS, endMs };
    const previous: MinuteWindow = { startMs: current.startMs - HEALTH_WINDOW_MINUTES * MINUTE_MS, endMs: current.startMs };
    const [services, grouped, previousTotals] = await Promise.all([
      this.deps.sql<{ id: string; name: string }[]>`SELECT id, name FROM services WHERE project_id = ${projectId} ORDER BY name, id`,
      this.deps.warehouse.groupedStats([projectId], current),
      this.deps.warehouse.projectTotals([projectId], previous),
    ]);
    const total = grouped.find((g) => g.level === 'project') ?? emptyStats();
    const perService = new Map(grouped.filter((g) => g.level === 'service').map((g) => [g.serviceId, g]));
    const previousEvaluations = previousTotals.get(projectId) ?? 0;
    const { score, status, breakdown } = healthScore(total, previousEvaluations);
    return {
      projectId,
      score,
      status,
      scoreBreakdown: breakdown,
      window: { start: new Date(current.startMs).toISOString(), end: new Date(current.endMs).toISOString(), minutes: HEALTH_WINDOW_MINUTES },
      totalEvaluations: total.evaluations,
      previousWindowEvaluations: previousEvaluations,
      evaluationsPerMinute: round(total.evaluations / HEALTH_WINDOW_MINUTES, 3),
      errorRate: round(rateOf(total.errors, total.evaluations), 6),
      evaluationErrors: total.evaluationErrors,
      p99LatencyMs: latency(total.p99LatencyMs),
      services: services.map((s) => {
        const stats = perService.get(s.id) ?? emptyStats();
        return {
          serviceId: s.id,
          name: s.name,
          status: levelOf(stats),
          evaluations: stats.evaluations,
          errors: stats.errors,
          errorRate: round(rateOf(stats.errors, stats.evaluations), 6),
          evaluationErrors: stats.evaluationErrors,
          p99LatencyMs: latency(stats.p99LatencyMs),
        };
      }),
      issues: degradationIssues(grouped.filter((g) => g.level === 'flag')),
      source: SOURCE,
    };
  }

  async heatmap(projectId: string, range: '15m' | '1h' | '24h' | '7d', filter: { serviceId?: string; environment?: Environment }) {
    if (filter.serviceId) {
      const [service] = await this.deps.sql<{ id: string }[]>`SELECT id FROM services WHERE id = ${filter.serviceId} AND project_id = ${projectId}`;
      if (!service) throw notFound('Service');
    }
    const window = rangeWindow(range, this.now(), HEATMAP_BUCKET_MINUTES[range]);
    const cells = await this.deps.warehouse.heatmapCells({ projectId, ...filter }, window, window.bucketMinutes);
    const buckets: string[] = [];
    const bucketIndex = new Map<number, number>();
    for (let at = window.startMs; at < window.endMs; at += window.bucketMinutes * MINUTE_MS) {
      bucketIndex.set(at, buckets.length);
      buckets.push(new Date(at).toISOString());
    }
    const rows = new Map<string, { flagKey: string; serviceId: string; total: number; counts: number[] }>();
    for (const cell of cells) {
      const id = `${cell.serviceId}\u0000${cell.flagKey}`;
      let row = rows.get(id);
      if (!row) rows.set(id, (row = { flagKey: cell.flagKey, serviceId: cell.serviceId, total: 0, counts: buckets.map(() => 0) }));
      row.counts[bucketIndex.get(cell.bucketMs)!] += cell.evaluations;
      row.total += cell.evaluations;
    }
    const all = [...rows.values()].sort((a, b) => b.total - a.total || a.flagKey.localeCompare(b.flagKey) || a.serviceId.localeCompare(b.serviceId));
    const flags = all.slice(0, HEATMAP_MAX_FLAGS);
    return {
      projectId,
      serviceId: filter.serviceId ?? null,
      environment: filter.environment ?? null,
      range: rangeBody(window),
      bucketMinutes: window.bucketMinutes,
      buckets,
      flags,
      totalFlags: all.length,
      totalEvaluations: all.reduce((s, r) => s + r.total, 0),
      maxCount: flags.reduce((m, r) => Math.max(m, ...r.counts), 0),
      source: SOURCE,
    };
  }

  async alerts(projectIds: string[], firingOnly: boolean) {
    const nowMs = this.now();
    const endMs = floorMinute(nowMs) + MINUTE_MS;
    const recent: MinuteWindow = { startMs: endMs - ALERT_WINDOW_MINUTES * MINUTE_MS, endMs };
    const baseline: MinuteWindow = { startMs: recent.startMs - ALERT_BASELINE_MINUTES * MINUTE_MS, endMs: recent.startMs };
    const { warehouse } = this.deps;
    const [grouped, baselineTotals, clientErrors, baselineClientErrors] = await Promise.all([
      warehouse.groupedStats(projectIds, recent),
      warehouse.projectTotals(projectIds, baseline),
      warehouse.clientErrorTotals(projectIds, recent),
      warehouse.clientErrorTotals(projectIds, baseline),
    ]);
    const all: AlertEntry[] = projectIds.flatMap((projectId) =>
      evaluateAlerts({
        projectId,
        project: grouped.find((g) => g.level === 'project' && g.projectId === projectId) ?? emptyStats(),
        flags: grouped.filter((g) => g.level === 'flag' && g.projectId === projectId),
        baselineEvaluations: baselineTotals.get(projectId) ?? 0,
        clientErrors: clientErrors.get(projectId) ?? 0,
        baselineClientErrors: baselineClientErrors.get(projectId) ?? 0,
      }),
    );
    const firingCount = all.filter((a) => a.status === 'firing').length;
    return {
      status: firingCount > 0 ? 'firing' : 'ok',
      firingCount,
      alerts: firingOnly ? all.filter((a) => a.status === 'firing') : all,
      evaluatedAt: new Date(nowMs).toISOString(),
      window: { start: new Date(recent.startMs).toISOString(), end: new Date(recent.endMs).toISOString(), minutes: ALERT_WINDOW_MINUTES },
    };
  }

  private async impactOf(scope: FlagScope, latest: ToggleEntry | undefined, windowMinutes: number) {
    if (!latest) {
      return {
        hasRecentToggle: false,
        latestToggle: null,
        healthStatus: 'none',
        windowMinutes,
        before: null,
        after: null,
        delta: null,
        recommendation: 'No toggle in the selected range: nothing to compare.',
      };
    }
    const windows = aroundChange(latest.timestampMs, windowMinutes);
    const [before, after] = await this.summaries(scope, windows);
    const delta = compareWindows(before, after);
    return {
      hasRecentToggle: true,
      latestToggle: latest,
      ...impactVerdict(before, after, delta),
      windowMinutes,
      before: { ...before, ...windowBody(windows.before) },
      after: { ...after, ...windowBody(windows.after) },
      delta,
    };
  }

  private summaries(scope: FlagScope, windows: { before: TimeSpan; after: TimeSpan }) {
    return Promise.all([windows.before, windows.after].map(async (w) => windowSummary(await this.deps.warehouse.flagStats(scope, w))));
  }

  private async requireFlag(ref: FlagRef): Promise<FlagRecord> {
    const flag = await this.deps.flags.get(ref);
    if (!flag) throw notFound(`Flag "${ref.key}"`);
    return flag;
  }

  private async projectFlags(projectId: string): Promise<FlagRecord[]> {
    const services = await this.deps.sql<{ id: string }[]>`SELECT id FROM services WHERE project_id = ${projectId}`;
    return (await Promise.all(services.map((s) => this.deps.flags.listByService(s.id)))).flat();
  }
}

const scopeOf = (flag: FlagRecord): FlagScope => ({ projectId: flag.projectId, serviceId: flag.serviceId, environment: flag.environment, flagKey: flag.key });

const windowBody = (w: TimeSpan) => ({ start: new Date(w.startMs).toISOString(), end: new Date(w.endMs).toISOString() });

const emptyStats = (): EvaluationStats => ({ evaluations: 0, errors: 0, evaluationErrors: 0, latencySumMs: 0, p50LatencyMs: null, p95LatencyMs: null, p99LatencyMs: null });

function seriesPoint(s: EvaluationStats | undefined) {
  const stats = s ?? emptyStats();
  return {
    evaluations: stats.evaluations,
    errors: stats.errors,
    evaluationErrors: stats.evaluationErrors,
    avgLatencyMs: stats.evaluations ? round(stats.latencySumMs / stats.evaluations) : null,
    p50LatencyMs: latency(stats.p50LatencyMs),
    p95LatencyMs: latency(stats.p95LatencyMs),
    p99LatencyMs: latency(stats.p99LatencyMs),
  };
}

/** Last 5 minutes against the 5 before: 20% either way is a trend. */
function trendOf(last5: number, previous5: number): 'increasing' | 'decreasing' | 'stable' | 'idle' {
  if (last5 === 0 && previous5 === 0) return 'idle';
  if (last5 >= previous5 * 1.2) return 'increasing';
  if (last5 <= previous5 * 0.8) return 'decreasing';
  return 'stable';
}
