/**
 * Pieces both metrics pages share: the answer types of the routes they read, the window picker,
 * the selects of a project's services and environments, and number formats.
 */
import { useId } from 'react';
import { isEnvironment, PRODUCTION_FIRST, type Environment } from '../../api/environments';
import type { operations } from '../../api/schema';
import { flagHref } from '../../links';

type Ok<K extends keyof operations> = operations[K] extends { responses: { 200: { content: { 'application/json': infer T } } } } ? T : never;
export type FlagMetrics = Ok<'getFlagsByKeyMetrics'>;
export type FlagVersion = Ok<'getFlagsByKeyHistory'>['versions'][number];
export type Heatmap = Ok<'getProjectsByIdEvaluationHeatmap'>;
export type Vitals = Ok<'getAnalyticsVitals'>;
export type SiteOverview = Ok<'getAnalyticsOverview'>;
export type Funnel = Ok<'getAnalyticsFunnel'>;
export type Experiment = Ok<'getExperimentsBandit'>['experiments'][number];
export type Service = Ok<'getServices'>['services'][number];

export type { Environment };
export const asEnvironment = (value: string | null): Environment => (isEnvironment(value) ? value : 'production');

/** The windows the metrics pages offer (every route they read takes these). */
export const WINDOWS = [
  { value: '1h', label: 'Last hour' },
  { value: '24h', label: 'Last 24 hours' },
  { value: '7d', label: 'Last 7 days' },
] as const;
export type WindowName = (typeof WINDOWS)[number]['value'];
export const asWindow = (value: string | null): WindowName => WINDOWS.find((w) => w.value === value)?.value ?? '24h';

/** Radio buttons for the window: arrow keys move between them, as in any radio group. */
export function WindowPicker({ value, onChange }: { value: WindowName; onChange: (value: WindowName) => void }) {
  const name = useId();
  return (
    <fieldset className="metrics-window">
      <legend>Window</legend>
      {WINDOWS.map((w) => (
        <label key={w.value}>
          <input type="radio" name={name} value={w.value} checked={value === w.value} onChange={() => onChange(w.value)} />
          <span>{w.label}</span>
        </label>
      ))}
    </fieldset>
  );
}

export function ServiceSelect({ services, value, onChange, label = 'Service' }: { services: Service[]; value: string; onChange: (id: string) => void; label?: string }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value)}>
        {!services.some((s) => s.id === value) && <option value="">Choose a service</option>}
        {services.map((s) => (
          <option key={s.id} value={s.id}>
            {s.name}
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
