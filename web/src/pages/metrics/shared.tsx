/**
 * Pieces both metrics pages share: the answer types of the routes they read, the window picker,
 * the selects of a project's services and environments, and number formats.
 */
import { useId } from 'react';
import { isEnvironment, PRODUCTION_FIRST, type Environment } from '../../api/environments';
import type { operations } from '../../api/schema';
import { timeText } from '../../components/metrics/time-chart';
import { flagHref } from '../../links';

type Ok<K extends keyof operations> = operations[K] extends { responses: { 200: { content: { 'application/json': infer T } } } } ? T : never;
export type FlagMetrics = Ok<'getFlagsByKeyMetrics'>;
export type FlagVersion = Ok<'getFlagsByKeyHistory'>['versions'][number];
export type Heatmap = Ok<'getProjectsByIdEvaluationHeatmap'>;
export type Vitals = Ok<'getAnalyticsVitals'>;
export type SiteOverview = Ok<'getAnalyticsOverview'>;
export type Funnel = Ok<'getAnalyticsFunnel'>;
export type FlagVariants = Ok<'getAnalyticsFlagsByKeyVariants'>;
export type Experiment = Ok<'getExperimentsBandit'>['experiments'][number];
export type Service = Ok<'getServices'>['services'][number];

export type { Environment };
export const asEnvironment = (value: string | null): Environment => (isEnvironment(value) ? value : 'production');

/** The windows the metrics pages offer, shortest first (the project page's heatmap stops at 7 days). */
export const WINDOWS = [
  { value: '1h', label: 'Last hour', name: 'the last hour', ms: 3_600_000 },
  { value: '24h', label: 'Last 24 hours', name: 'the last 24 hours', ms: 86_400_000 },
  { value: '7d', label: 'Last 7 days', name: 'the last 7 days', ms: 604_800_000 },
  { value: '30d', label: 'Last 30 days', name: 'the last 30 days', ms: 2_592_000_000 },
] as const;
export type WindowName = (typeof WINDOWS)[number]['value'];
export type ProjectWindowName = Exclude<WindowName, '30d'>;
export const PROJECT_WINDOWS = ['1h', '24h', '7d'] as const satisfies readonly ProjectWindowName[];
export const FLAG_WINDOWS = ['1h', '24h', '7d', '30d'] as const satisfies readonly WindowName[];

const windowOf = (value: WindowName) => WINDOWS.find((w) => w.value === value)!;
export const windowMs = (value: WindowName) => windowOf(value).ms;
export const windowName = (value: WindowName) => windowOf(value).name;

/** The `range` the user chose (the query), if it is one of `windows`. */
export const chosenWindow = <W extends WindowName>(value: string | null, windows: readonly W[]): W | undefined => windows.find((w) => w === value);

export interface DefaultWindow<W extends WindowName> {
  window: W;
  reason: string;
}

/**
 * The window a page opens with when the user chose none: the shortest whose total equals the
 * longest's (every point of the longest window falls in it), so a fresh spike is not squashed
 * into a day; without data, the shortest that holds `since` (when the flag or project was
 * created; null when unknown), the longest when none does. Undefined while anything it needs is
 * still loading.
 */
export function defaultWindow<W extends WindowName>(totals: { window: W; total: number | undefined }[], since: { ms: number; what: string } | null | undefined, nowMs: number): DefaultWindow<W> | undefined {
  if (totals.some((t) => t.total === undefined)) return undefined;
  const longest = totals[totals.length - 1];
  if (longest.total) {
    const holding = totals.find((t) => t.total === longest.total)!;
    return { window: holding.window, reason: `every evaluation of ${windowName(longest.window)} falls in it` };
  }
  if (since === undefined) return undefined;
  if (since === null) return { window: longest.window, reason: `no evaluations in ${windowName(longest.window)}` };
  const covering = totals.find((t) => nowMs - since.ms <= windowMs(t.window)) ?? longest;
  return { window: covering.window, reason: `no evaluations in ${windowName(longest.window)}; ${since.what} ${timeText(since.ms)}` };
}

/** Which window is shown and why: chosen by the user, or picked from the data. */
export function WindowReason({ range, picked }: { range: WindowName; picked: DefaultWindow<WindowName> | undefined }) {
  return (
    <p className="muted" data-testid="window-reason">
      Showing {windowName(range)}
      {picked ? ` (picked from the data: ${picked.reason}).` : ' (your choice).'}
    </p>
  );
}

/** Radio buttons for the window: arrow keys move between them, as in any radio group. */
export function WindowPicker<W extends WindowName>({ value, windows, onChange }: { value: W | undefined; windows: readonly W[]; onChange: (value: W) => void }) {
  const name = useId();
  return (
    <fieldset className="metrics-window">
      <legend>Window</legend>
      {WINDOWS.filter((w) => (windows as readonly WindowName[]).includes(w.value)).map((w) => (
        <label key={w.value}>
          <input type="radio" name={name} value={w.value} checked={value === w.value} onChange={() => onChange(w.value as W)} />
          <span>{w.label}</span>
        </label>
      ))}
    </fieldset>
  );
}

/** `notes` add to a service's name in the list (e.g. that it has no browser data). */
export function ServiceSelect({
  services,
  value,
  onChange,
  label = 'Service',
  notes,
}: {
  services: Service[];
  value: string;
  onChange: (id: string) => void;
  label?: string;
  notes?: Map<string, string>;
}) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value)}>
        {!services.some((s) => s.id === value) && <option value="">Choose a service</option>}
        {services.map((s) => (
          <option key={s.id} value={s.id}>
            {s.name}
            {notes?.get(s.id) ? ` (${notes.get(s.id)})` : ''}
          </option>
        ))}
      </select>
    </div>
  );
}

export function EnvironmentSelect({ value, onChange }: { value: Environment; onChange: (value: Environment) => void }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>Environment</label>
      <select id={id} value={value} onChange={(e) => onChange(asEnvironment(e.target.value))}>
        {PRODUCTION_FIRST.map((env) => (
          <option key={env} value={env}>
            {env}
          </option>
        ))}
      </select>
    </div>
  );
}

/** Rates per second with enough digits for a quiet flag (0.0125/s). */
export const perSecond = (v: number) => `${v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v === 0 ? '0' : v.toPrecision(2)}/s`;
export const milliseconds = (v: number) => `${v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v === 0 ? '0' : v.toPrecision(2)} ms`;
export const percentValue = (v: number) => `${v >= 10 ? v.toFixed(0) : v.toFixed(v >= 1 ? 1 : 2)}%`;
export const count = (v: number) => Math.round(v).toLocaleString();

/** A stat in a definition list: dt the name, dd the value (or a dash while unknown). */
export function Stat({ label, value }: { label: string; value: string | undefined }) {
  return (
    <div className="metrics-stat">
      <dt>{label}</dt>
      <dd>{value ?? '—'}</dd>
    </div>
  );
}

export { flagHref };

/** The metrics page of one flag in one service and environment. */
export const flagMetricsHref = (projectId: string, flagKey: string, serviceId: string, environment: string, range?: string) =>
  flagHref(projectId, flagKey, serviceId, environment, '/metrics', range ? { range } : {});
