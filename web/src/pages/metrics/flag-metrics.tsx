/**
 * One flag's traffic (GET /api/flags/:key/metrics): evaluations per second, error rate and
 * latency percentiles over the chosen window, with the flag's toggles and other changes marked on
 * every chart (the insights' recentToggles and the flag's version history), the toggle impact
 * verdict, and the reason and value breakdowns. Refreshes every 15 s (the answer's cache life)
 * while the tab is visible.
 */
import { useCallback, useMemo, useRef, useState } from 'react';
import { Link, useLocation, useParams, useSearch } from 'wouter';
import { useFlag, useFlagHistory, useFlagMetrics, useServices } from '../../api/resources';
import { Breakdown, percent } from '../../components/metrics/breakdown';
import { useLiveRefresh } from '../../components/metrics/live';
import { TimeChart, timeText, type ChartMarker } from '../../components/metrics/time-chart';
import { LoadState } from '../../components/status';
import { useTitle } from '../../page-title';
import { VariantConversions } from './variant-conversions';
import {
  asEnvironment,
  chosenWindow,
  count,
  defaultWindow,
  FLAG_WINDOWS,
  EnvironmentSelect,
  flagHref,
  milliseconds,
  percentValue,
  perSecond,
  ServiceSelect,
  Stat,
  WindowPicker,
  WindowReason,
  type FlagMetrics,
  type Environment,
  type FlagVersion,
} from './shared';

const REFRESH_MS = 15_000;
/** Versions read for change markers: the newest 100 (the route's page limit). */
const HISTORY_LIMIT = 100;

export default function FlagMetricsPage() {
  const { projectId, flagKey } = useParams<{ projectId: string; flagKey: string }>();
  useTitle(`Metrics of ${flagKey}`);
  const [location, navigate] = useLocation();
  const query = new URLSearchParams(useSearch());
  const serviceId = query.get('serviceId') ?? '';
  const environment = asEnvironment(query.get('environment'));
  const chosen = chosenWindow(query.get('range'), FLAG_WINDOWS);
  const picked = useDefaultWindow(flagKey, serviceId, environment, !chosen);
  const range = chosen ?? picked?.window;
  const [live, setLive] = useState(true);

  const setQuery = (changes: Record<string, string>) => {
    const next = new URLSearchParams(query);
    for (const [name, value] of Object.entries(changes)) next.set(name, value);
    navigate(`${location}?${next.toString()}`, { replace: true });
  };

  // A refresh asks past the browser's cache: the answers may be cached for 15 s (max-age).
  const refreshing = useRef(false);
  const cache = (): RequestCache => (refreshing.current ? 'no-cache' : 'default');
  const services = useServices(projectId);
  const metrics = useFlagMetrics(flagKey, { serviceId, environment, range }, { enabled: !!serviceId && !!range, cache });
  const history = useFlagHistory(flagKey, { serviceId, environment, limit: HISTORY_LIMIT }, { enabled: !!serviceId, cache });
  const [updating, setUpdating] = useState(false);
  const { reload: reloadMetrics } = metrics;
  const { reload: reloadHistory } = history;
  const refresh = useCallback(async () => {
    setUpdating(true);
    refreshing.current = true;
    const reloads = Promise.all([reloadMetrics(), reloadHistory()]);
    refreshing.current = false;
    await reloads;
    setUpdating(false);
  }, [reloadMetrics, reloadHistory]);
  useLiveRefresh(refresh, REFRESH_MS, live && !!serviceId && !!range);

  const data = metrics.data;
  const changes = useMemo(() => (data ? changeMarkers(data, history.data?.versions ?? []) : []), [data, history.data]);
  const service = services.data?.services.find((s) => s.id === serviceId);
  const updatedAt = useMemo(() => (data ? new Date() : undefined), [data]);
  // The answer shown is for another window, service or environment until the new one comes.
  const stale = !!data && (data.range.rangeLabel !== range || data.serviceId !== serviceId || data.environment !== environment);

  return (
    <div className="metrics-page">
      <h1>
        Metrics of <code>{flagKey}</code>
      </h1>
      <p className="muted">
        {service ? `${service.name} · ${environment} · ` : 'Evaluations of this flag, as the data plane recorded them. '}
        {serviceId && <Link href={flagHref(projectId, flagKey, serviceId, environment)}>Open the flag</Link>}
      </p>

      <div className="metrics-controls">
        <ServiceSelect services={services.data?.services ?? []} value={serviceId} onChange={(id) => setQuery({ serviceId: id })} />
        <EnvironmentSelect value={environment} onChange={(env) => setQuery({ environment: env })} />
        <WindowPicker value={range} windows={FLAG_WINDOWS} onChange={(w) => setQuery({ range: w })} />
        <div className="metrics-live">
          <label className="metrics-check">
            <input type="checkbox" checked={live} onChange={(e) => setLive(e.target.checked)} /> Refresh every 15 seconds
          </label>
          <button type="button" onClick={() => void refresh()} disabled={updating || !serviceId}>
            {updating ? 'Refreshing…' : 'Refresh now'}
          </button>
          <span className="muted metrics-updated">{stale ? 'Loading…' : updatedAt && `Updated ${updatedAt.toLocaleTimeString()}`}</span>
        </div>
      </div>

      {!serviceId ? (
        <p>Choose the service whose evaluations of this flag to show.</p>
      ) : (
        <LoadState loading={metrics.loading || !range} error={metrics.error}>
          {data && range && (
            <div aria-busy={stale} className={stale ? 'metrics-stale' : undefined}>
              <WindowReason range={range} picked={chosen ? undefined : picked} />
              <FlagMetricsBody data={data} changes={changes} />
              <VariantConversions projectId={projectId} flagKey={flagKey} serviceId={serviceId} environment={environment} range={range} />
            </div>
          )}
        </LoadState>
      )}
    </div>
  );
}

/**
 * The window to open with when the query names none: the flag's totals in every window decide
 * (defaultWindow), its creation time when it has no evaluations. Each total is the answer the
 * page shows for that window, so the pick costs no request the window buttons would not make.
 */
function useDefaultWindow(flagKey: string, serviceId: string, environment: Environment, enabled: boolean) {
  const on = { enabled: enabled && !!serviceId };
  const totals = [
    { window: '1h' as const, metrics: useFlagMetrics(flagKey, { serviceId, environment, range: '1h' }, on) },
    { window: '24h' as const, metrics: useFlagMetrics(flagKey, { serviceId, environment, range: '24h' }, on) },
    { window: '7d' as const, metrics: useFlagMetrics(flagKey, { serviceId, environment, range: '7d' }, on) },
    { window: '30d' as const, metrics: useFlagMetrics(flagKey, { serviceId, environment, range: '30d' }, on) },
  ].map((t) => ({ window: t.window, total: t.metrics.data?.summary.totalEvaluations }));
  const flag = useFlag(flagKey, serviceId, environment);
  const createdAt = flag.data?.createdAt;
  // A flag not found (or not readable) has no creation time: the longest window then.
  const since = createdAt ? { ms: Date.parse(createdAt), what: 'the flag was created' } : flag.error ? null : undefined;
  return enabled ? defaultWindow(totals, since, Date.now()) : undefined;
}

interface Change extends ChartMarker {
  kind: 'toggle' | 'change';
  actor: string;
}

/**
 * The markers in the window, oldest first: every toggle the insights report, and the flag's other
 * changes (edits, rollbacks) from its version history.
 */
function changeMarkers(data: FlagMetrics, versions: FlagVersion[]): Change[] {
  const startMs = Date.parse(data.range.start);
  const endMs = Date.parse(data.range.end);
  const toggles: Change[] = data.recentToggles.map((t) => ({
    at: t.timestampMs,
    kind: 'toggle',
    actor: t.actor,
    label: t.transition.to === 'enabled' ? 'Turned on' : 'Turned off',
  }));
  const toggleIds = new Set(data.recentToggles.map((t) => t.id));
  const edits: Change[] = versions
    .filter((v) => !toggleIds.has(v.id) && v.changeType !== 'toggle')
    .map((v) => ({ at: Date.parse(v.createdAt), kind: 'change' as const, actor: v.actor, label: `${changeName(v.changeType)} (version ${v.version})` }))
    .filter((c) => c.at >= startMs && c.at < endMs);
  return [...toggles, ...edits].sort((a, b) => a.at - b.at);
}

function changeName(type: FlagVersion['changeType']): string {
  return { create: 'Created', update: 'Edited', toggle: 'Toggled', delete: 'Deleted', rollback: 'Rolled back' }[type];
}

function FlagMetricsBody({ data, changes }: { data: FlagMetrics; changes: Change[] }) {
  const { summary, realtime, toggleImpact: impact } = data;
  const charts = useMemo(() => {
    const bucketSeconds = data.bucketMinutes * 60;
    const points = data.timeSeries;
    return {
      span: [Date.parse(data.range.start), Date.parse(data.range.end)] as [number, number],
      times: points.map((p) => Date.parse(p.timestamp)),
      rate: [{ label: 'Evaluations per second', values: points.map((p) => p.evaluations / bucketSeconds) }],
      errors: [{ label: 'Error rate', values: points.map((p) => (p.evaluations ? (p.errors / p.evaluations) * 100 : null)) }],
      latency: [
        { label: 'p50', values: points.map((p) => p.p50LatencyMs) },
        { label: 'p95', values: points.map((p) => p.p95LatencyMs) },
        { label: 'p99', values: points.map((p) => p.p99LatencyMs) },
      ],
    };
  }, [data]);
  const ms = (v: number | null) => (v === null ? undefined : milliseconds(v));
  const bucket = data.bucketMinutes === 1 ? 'per minute' : `per ${data.bucketMinutes} minutes`;

  return (
    <>
      <section aria-labelledby="flag-summary">
        <h2 id="flag-summary">Summary</h2>
        <dl className="metrics-stats">
          <Stat label="Evaluations" value={count(summary.totalEvaluations)} />
          <Stat label="Average rate" value={perSecond(summary.evaluationsPerSecond)} />
          <Stat label="Last minute" value={perSecond(realtime.evaluationsPerSecond)} />
          <Stat label="Errors" value={`${count(summary.totalErrors)} (${percent(summary.errorRate)})`} />
          <Stat label="Failed evaluations" value={count(summary.evaluationErrors)} />
          <Stat label="Latency p50" value={ms(summary.p50LatencyMs)} />
          <Stat label="Latency p95" value={ms(summary.p95LatencyMs)} />
          <Stat label="Latency p99" value={ms(summary.p99LatencyMs)} />
          <Stat label="Trend" value={realtime.trend} />
        </dl>
        <p className="muted">
          {realtime.lastEvaluatedAt ? `Last evaluated ${timeText(Date.parse(realtime.lastEvaluatedAt))}.` : 'Not evaluated in this window.'} Points are {bucket}.
        </p>
      </section>

      <section aria-labelledby="flag-charts" className="metrics-charts">
        <h2 id="flag-charts">Over time</h2>
        <TimeChart title="Evaluations per second" times={charts.times} series={charts.rate} span={charts.span} format={perSecond} markers={changes} />
        <TimeChart title="Error rate" times={charts.times} series={charts.errors} span={charts.span} format={percentValue} markers={changes} />
        <TimeChart title="Latency percentiles" times={charts.times} series={charts.latency} span={charts.span} format={milliseconds} markers={changes} />
      </section>

      <section aria-labelledby="flag-changes">
        <h2 id="flag-changes">Toggles and changes</h2>
        {changes.length ? (
          <ol className="metrics-changes">
            {changes.map((c) => (
              <li key={`${c.at}-${c.label}`}>
                <strong>{c.label}</strong> <span className="muted">by {c.actor}</span> <time dateTime={new Date(c.at).toISOString()}>{timeText(c.at)}</time>
              </li>
            ))}
          </ol>
        ) : (
          <p className="muted">No toggles or changes in this window.</p>
        )}
        <p>
          Latest toggle: <strong>{impactName[impact.healthStatus]}</strong>. {impact.recommendation}
        </p>
      </section>

      <section aria-labelledby="flag-breakdowns" className="metrics-breakdowns">
        <h2 id="flag-breakdowns">Breakdowns</h2>
        <Breakdown caption="Evaluations by reason" labelHeading="Reason" rows={rowsOf(data.reasonBreakdown)} />
        <Breakdown caption="Evaluations by value" labelHeading="Value" rows={rowsOf(data.valueBreakdown)} />
      </section>
    </>
  );
}

const impactName: Record<FlagMetrics['toggleImpact']['healthStatus'], string> = {
  none: 'no toggle in this window',
  insufficient_data: 'too little traffic to judge',
  healthy: 'healthy',
  warning: 'warning',
  degraded: 'degraded',
};

const rowsOf = (counts: Record<string, number>) => Object.entries(counts).map(([label, n]) => ({ label, count: n }));
