import type { Analytics } from '../../../../analytics/client';
import type { Sql } from '../../../infra/postgres';
import { count, dropOffRate, numberOrNull, ratio, selectRows } from './clickhouse';
import { rawInWindow, windowParams, type TimeWindow } from './range';

/**
 * Product analytics of the console itself: the admin funnel of one project (admin_events,
 * `project_id` = the event's properties.projectId) and adoption cohorts (projects from Postgres,
 * their evaluation traffic from evaluation_minutes).
 */

export const ADMIN_FUNNEL_STEPS = ['screen_viewed', 'flag_viewed', 'activation'] as const;

export interface AdminFunnel {
  funnel: { steps: { event: (typeof ADMIN_FUNNEL_STEPS)[number]; users: number; conversionRate: number; dropOffRate: number }[] };
  experimentCycleTime: { sampleSize: number; medianHours: number | null };
}

/**
 * A user (user_hash) reaches step n when they did steps 1..n in this order inside the window
 * (ClickHouse windowFunnel over the whole range; other events between steps and repeated steps
 * do not break the chain, a skipped step ends it). conversionRate: users at the step / users at
 * the first step; dropOffRate: share of the previous step's users who did not reach it.
 * Experiment cycle time: per user, hours from their first flag_viewed to their first activation
 * after it; the median (interpolated) over the users who did both.
 */
export async function adminFunnel(analytics: Analytics, projectId: string, w: TimeWindow): Promise<AdminFunnel> {
  const params = { projectId, ...windowParams(w), windowMs: w.toMs - w.fromMs, steps: [...ADMIN_FUNNEL_STEPS] };
  const scope = `project_id = {projectId:String} AND ${rawInWindow('occurred_at')} AND user_hash != '' AND event IN {steps:Array(String)}`;
  const [levels, [cycle]] = await Promise.all([
    selectRows<{ level: number; users: string }>(
      analytics,
      `SELECT level, count() AS users FROM (
         SELECT user_hash, windowFunnel({windowMs:UInt64})(toUInt64(toUnixTimestamp64Milli(occurred_at)),
                  event = 'screen_viewed', event = 'flag_viewed', event = 'activation') AS level
         FROM admin_events WHERE ${scope} GROUP BY user_hash)
       GROUP BY level`,
      params,
    ),
    selectRows<{ sample_size: string; median_hours: number | null }>(
      analytics,
      `SELECT count() AS sample_size, if(count() = 0, NULL, quantileExactInclusive(0.5)(hours)) AS median_hours FROM (
         SELECT (activated_ms - viewed_ms) / 3600000 AS hours FROM (
           SELECT minIf(toUnixTimestamp64Milli(occurred_at), event = 'flag_viewed') AS viewed_ms,
                  arrayFilter(t -> t >= viewed_ms, groupArrayIf(toUnixTimestamp64Milli(occurred_at), event = 'activation')) AS later,
                  arrayMin(later) AS activated_ms,
                  countIf(event = 'flag_viewed') AS views
           FROM admin_events WHERE ${scope} GROUP BY user_hash)
         WHERE views > 0 AND notEmpty(later))`,
      params,
    ),
  ]);
  const reached = ADMIN_FUNNEL_STEPS.map((_, i) => levels.filter((l) => Number(l.level) >= i + 1).reduce((n, l) => n + count(l.users), 0));
  return {
    funnel: {
      steps: ADMIN_FUNNEL_STEPS.map((event, i) => ({
        event,
        users: reached[i],
        conversionRate: ratio(reached[i], reached[0]),
        dropOffRate: i === 0 ? 0 : dropOffRate(reached[i - 1], reached[i]),
      })),
    },
    experimentCycleTime: { sampleSize: count(cycle?.sample_size), medianHours: numberOrNull(cycle?.median_hours) },
  };
}

export interface AdoptionCohort {
  week: string;
  createdProjects: number;
  adoptedProjects: number;
  adoptionRate: number;
}

const WEEK_MS = 7 * 86_400_000;
/** ISO weeks start on Monday; 1970-01-05 was a Monday. */
const FIRST_MONDAY_MS = 4 * 86_400_000;
export const weekStart = (ms: number) => Math.floor((ms - FIRST_MONDAY_MS) / WEEK_MS) * WEEK_MS + FIRST_MONDAY_MS;

/**
 * Projects among `projectIds` created inside the window, by the ISO week (Monday 00:00 UTC) of
 * their creation; a project is adopted once it has evaluation traffic (any row of
 * evaluation_minutes, kept 400 days). Every week the window touches is listed, empty ones too.
 */
export async function adoptionCohorts(analytics: Analytics, sql: Sql, projectIds: string[], w: TimeWindow): Promise<AdoptionCohort[]> {
  const created = projectIds.length
    ? await sql<{ id: string; created_at: Date }[]>`
        SELECT id, created_at FROM projects WHERE id IN ${sql(projectIds)} AND created_at >= ${new Date(w.fromMs)} AND created_at <= ${new Date(w.toMs)}`
    : [];
  const adopted = created.length
    ? new Set(
        (
          await selectRows<{ project_id: string }>(
            analytics,
            'SELECT DISTINCT project_id FROM evaluation_minutes WHERE project_id IN {projectIds:Array(String)}',
            { projectIds: created.map((p) => p.id) },
          )
        ).map((r) => r.project_id),
      )
    : new Set<string>();
  const cohorts: AdoptionCohort[] = [];
  for (let week = weekStart(w.fromMs); week <= w.toMs; week += WEEK_MS) {
    const inWeek = created.filter((p) => weekStart(p.created_at.getTime()) === week);
    const adoptedCount = inWeek.filter((p) => adopted.has(p.id)).length;
    cohorts.push({ week: new Date(week).toISOString(), createdProjects: inWeek.length, adoptedProjects: adoptedCount, adoptionRate: ratio(adoptedCount, inWeek.length) });
  }
  return cohorts;
}
