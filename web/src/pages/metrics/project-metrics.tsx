/**
 * A project's metrics: evaluations over time and the busiest flags (the evaluation heatmap,
 * summed), a service's web vitals and visits (browser analytics, the service is the site), a
 * funnel of outcome events split by the variant a flag gave each user, and the allocations of the
 * project's bandit experiments over time (the flag versions each reallocation wrote).
 */
import { useMemo, useState } from 'react';
import { Link, useLocation, useParams, useSearch } from 'wouter';
import { api, ApiError, call } from '../../api/client';
import {
  useBanditExperiments,
  useEvaluationHeatmap,
  useEventNames,
  useFlagHistory,
  useFlags,
  useProject,
  useServices,
  useSiteEventCounts,
  useSiteOverview,
  useWebVitals,
} from '../../api/resources';
import { Field, FormError, SubmitButton, useSubmit } from '../../components/forms';
import { percent } from '../../components/metrics/breakdown';
import { TimeChart, timeText, type ChartSeries } from '../../components/metrics/time-chart';
import { LoadState } from '../../components/status';
import {
  asEnvironment,
  chosenWindow,
  count,
  defaultWindow,
  EnvironmentSelect,
  flagMetricsHref,
  milliseconds,
  perSecond,
  PROJECT_WINDOWS,
  ServiceSelect,
  Stat,
  windowMs,
  WindowPicker,
  WindowReason,
  type Environment,
  type Experiment,
  type Funnel,
  type Heatmap,
  type Service,
  type ProjectWindowName,
  type Vitals,
} from './shared';

/** Flags listed under the evaluations chart. */
const TOP_FLAGS = 10;
/** Browser events counted per service to find the sites with data (the events route's page). */
const SITE_EVENTS_COUNTED = 100;

export default function ProjectMetricsPage() {
  const { projectId } = useParams<{ projectId: string }>();
  const [location, navigate] = useLocation();
  const query = new URLSearchParams(useSearch());
  const environment = asEnvironment(query.get('environment'));
  const chosen = chosenWindow(query.get('range'), PROJECT_WINDOWS);
  const picked = useDefaultWindow(projectId, environment, !chosen);
  const range = chosen ?? picked?.window;
  const services = useServices(projectId);
  const serviceList = services.data?.services ?? [];
  const eventCounts = useSiteEventCounts(
    serviceList.map((s) => s.id),
    SITE_EVENTS_COUNTED,
  );
  const siteNotes = useMemo(() => eventCounts.data && siteNotesOf(eventCounts.data), [eventCounts.data]);
  // The busiest site by default: a service without browser events would show empty vitals.
  const serviceId = query.get('serviceId') ?? (eventCounts.data ? busiestSite(serviceList, eventCounts.data) : serviceList[0]?.id) ?? '';

  const setQuery = (changes: Record<string, string>) => {
    const next = new URLSearchParams(query);
    for (const [name, value] of Object.entries(changes)) next.set(name, value);
    navigate(`${location}?${next.toString()}`, { replace: true });
  };

  return (
    <div className="metrics-page">
      <h1>Metrics</h1>
      <div className="metrics-controls">
        <EnvironmentSelect value={environment} onChange={(env) => setQuery({ environment: env })} />
        <WindowPicker value={range} windows={PROJECT_WINDOWS} onChange={(w) => setQuery({ range: w })} />
      </div>
      {range && <WindowReason range={range} picked={chosen ? undefined : picked} />}
      <LoadState loading={!range} error={undefined}>
        {range && <EvaluationsOverview projectId={projectId} environment={environment} range={range} />}
      </LoadState>
      <LoadState loading={services.loading} error={services.error}>
        {serviceList.length ? (
          <>
            <div className="metrics-controls">
              <ServiceSelect label="Service (site)" services={serviceList} value={serviceId} notes={siteNotes} onChange={(id) => setQuery({ serviceId: id })} />
            </div>
            {serviceId && range && (
              <>
                <WebVitals serviceId={serviceId} range={range} />
                <FunnelByVariant projectId={projectId} service={serviceList.find((s) => s.id === serviceId)} environment={environment} range={range} />
              </>
            )}
          </>
        ) : (
          <p>No services yet: web vitals and funnels are per service.</p>
        )}
      </LoadState>
      <BanditAllocations projectId={projectId} />
    </div>
  );
}

/**
 * The window to open with when the query names none: the project's evaluation totals in each
 * window decide (defaultWindow), its creation time when it has none. The totals are the answers
 * the window buttons show, so the pick adds no request of its own.
 */
function useDefaultWindow(projectId: string, environment: Environment, enabled: boolean) {
  const on = { enabled };
  const totals = [
    { window: '1h' as const, heatmap: useEvaluationHeatmap(projectId, { range: '1h', environment }, on) },
    { window: '24h' as const, heatmap: useEvaluationHeatmap(projectId, { range: '24h', environment }, on) },
    { window: '7d' as const, heatmap: useEvaluationHeatmap(projectId, { range: '7d', environment }, on) },
  ].map((t) => ({ window: t.window, total: t.heatmap.data?.totalEvaluations }));
  const project = useProject(projectId);
  const createdAt = project.data?.createdAt;
  const since = createdAt ? { ms: Date.parse(createdAt), what: 'the project was created' } : project.error ? null : undefined;
  return enabled ? defaultWindow(totals, since, Date.now()) : undefined;
}

/** Services without browser events are marked; those with the most events counted show how many. */
function siteNotesOf(counts: Map<string, number>): Map<string, string> {
  return new Map([...counts].map(([id, n]) => [id, n === 0 ? 'no browser data' : n >= SITE_EVENTS_COUNTED ? `${SITE_EVENTS_COUNTED}+ browser events` : `${n} browser events`]));
}

function busiestSite(services: Service[], counts: Map<string, number>): string | undefined {
  const best = services.reduce<Service | undefined>((top, s) => ((counts.get(s.id) ?? 0) > (top ? counts.get(top.id) ?? 0 : 0) ? s : top), undefined);
  return (best ?? services[0])?.id;
}

function EvaluationsOverview({ projectId, environment, range }: { projectId: string; environment: Environment; range: ProjectWindowName }) {
  const heatmap = useEvaluationHeatmap(projectId, { range, environment });
  const data = heatmap.data;
  const chart = useMemo(() => (data ? projectSeries(data) : undefined), [data]);
  return (
    <section aria-labelledby="project-evaluations">
      <h2 id="project-evaluations">Evaluations</h2>
      <LoadState loading={heatmap.loading} error={heatmap.error}>
        {data && chart && (
          <>
            <dl className="metrics-stats">
              <Stat label="Evaluations" value={count(data.totalEvaluations)} />
              <Stat label="Average rate" value={perSecond(data.totalEvaluations / (data.range.minutes * 60))} />
              <Stat label="Flags evaluated" value={count(data.totalFlags)} />
            </dl>
            <TimeChart title={`Evaluations per second, ${environment}`} times={chart.times} series={chart.series} span={chart.span} format={perSecond} />
            {data.flags.length ? (
              <table>
                <caption>Busiest flags</caption>
                <thead>
                  <tr>
                    <th scope="col">Flag</th>
                    <th scope="col" className="metrics-num">
                      Evaluations
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {data.flags.slice(0, TOP_FLAGS).map((flag) => (
                    <tr key={`${flag.serviceId}/${flag.flagKey}`}>
                      <th scope="row">
                        <Link href={flagMetricsHref(projectId, flag.flagKey, flag.serviceId, environment, range)}>{flag.flagKey}</Link>
                      </th>
                      <td className="metrics-num">{count(flag.total)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            ) : (
              <p className="muted">No evaluations in {environment} in this window.</p>
            )}
          </>
        )}
      </LoadState>
    </section>
  );
}

/** The heatmap's columns summed over its flags, per second. */
function projectSeries(data: Heatmap): { times: number[]; span: [number, number]; series: ChartSeries[] } {
  const seconds = data.bucketMinutes * 60;
  const totals = data.buckets.map((_, i) => data.flags.reduce((sum, f) => sum + (f.counts[i] ?? 0), 0));
  return {
    times: data.buckets.map((b) => Date.parse(b)),
    span: [Date.parse(data.range.start), Date.parse(data.range.end)] as [number, number],
    series: [{ label: 'Evaluations per second', values: totals.map((n) => n / seconds) }],
  };
}

/** Vitals in milliseconds share a chart; CLS, a unitless score, has its own. */
const TIMED_VITALS = ['lcp', 'fcp', 'inp', 'ttfb'] as const;
const VITAL_NAMES: Record<Vitals['vitals'][number]['metric'], string> = {
  lcp: 'Largest contentful paint (LCP)',
  fcp: 'First contentful paint (FCP)',
  inp: 'Interaction to next paint (INP)',
  ttfb: 'Time to first byte (TTFB)',
  cls: 'Cumulative layout shift (CLS)',
};

/** CLS scores: three decimals, no unit. */
const layoutShift = (v: number) => v.toFixed(3);

function WebVitals({ serviceId, range }: { serviceId: string; range: ProjectWindowName }) {
  const vitals = useWebVitals({ siteId: serviceId, range });
  const overview = useSiteOverview({ siteId: serviceId, range });
  const chart = useMemo(() => (vitals.data ? vitalSeries(vitals.data) : undefined), [vitals.data]);
  // The answer names its window only by name: the span ends at the time it came.
  const span = useMemo(() => (vitals.data ? ([Date.now() - windowMs(range), Date.now()] as [number, number]) : undefined), [vitals.data, range]);
  const vitalValue = (metric: string, v: number | null) => (v === null ? '—' : metric === 'cls' ? layoutShift(v) : milliseconds(v));
  const site = overview.data;
  return (
    <section aria-labelledby="web-vitals">
      <h2 id="web-vitals">Visits and web vitals</h2>
      <LoadState loading={overview.loading} error={overview.error}>
        <dl className="metrics-stats">
          <Stat label="Visitors" value={site && count(site.visitors)} />
          <Stat label="Pageviews" value={site && count(site.pageviews)} />
          <Stat label="Bounce rate" value={site && percent(site.bounceRate)} />
          <Stat label="Average session" value={site && `${(site.avgSessionDuration / 1000).toFixed(0)} s`} />
        </dl>
      </LoadState>
      <LoadState loading={vitals.loading} error={vitals.error}>
        {vitals.data && chart && (
          <>
            <table>
              <caption>Web vitals (75th percentile is the usual target)</caption>
              <thead>
                <tr>
                  <th scope="col">Metric</th>
                  <th scope="col" className="metrics-num">
                    p50
                  </th>
                  <th scope="col" className="metrics-num">
                    p75
                  </th>
                  <th scope="col" className="metrics-num">
                    p95
                  </th>
                  <th scope="col" className="metrics-num">
                    Samples
                  </th>
                </tr>
              </thead>
              <tbody>
                {vitals.data.vitals.map((v) => (
                  <tr key={v.metric}>
                    <th scope="row">{VITAL_NAMES[v.metric]}</th>
                    <td className="metrics-num">{vitalValue(v.metric, v.p50)}</td>
                    <td className="metrics-num">
                      <strong>{vitalValue(v.metric, v.p75)}</strong>
                    </td>
                    <td className="metrics-num">{vitalValue(v.metric, v.p95)}</td>
                    <td className="metrics-num">{count(v.count)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {chart.times.length ? (
              <>
                <TimeChart title="Web vitals p75 over time" times={chart.times} series={chart.series} span={span} format={milliseconds} />
                <TimeChart title="Cumulative layout shift (CLS) p75 over time" times={chart.times} series={chart.layoutShift} span={span} format={layoutShift} />
              </>
            ) : (
              <p className="muted">No web vitals from this site in this window: the browser SDK reports them as webvital events.</p>
            )}
          </>
        )}
      </LoadState>
    </section>
  );
}

/** One line per vital (the timed ones together, CLS apart); the answer has a row per metric and bucket that had samples. */
function vitalSeries(data: Vitals): { times: number[]; series: ChartSeries[]; layoutShift: ChartSeries[] } {
  const times = [...new Set(data.timeSeries.map((p) => Date.parse(p.timestamp)))].sort((a, b) => a - b);
  const at = new Map(times.map((t, i) => [t, i]));
  const line = (metric: Vitals['vitals'][number]['metric']) => {
    const values: (number | null)[] = times.map(() => null);
    for (const p of data.timeSeries) if (p.metric === metric) values[at.get(Date.parse(p.timestamp))!] = p.p75;
    return { label: `${metric.toUpperCase()} p75`, values };
  };
  return { times, series: TIMED_VITALS.map(line), layoutShift: [line('cls')] };
}

function FunnelByVariant({ projectId, service, environment, range }: { projectId: string; service?: Service; environment: Environment; range: ProjectWindowName }) {
  const serviceId = service?.id ?? '';
  const flags = useFlags({ projectId, serviceId, environment, limit: 100 });
  const names = useEventNames({ projectId, serviceId });
  const [steps, setSteps] = useState('');
  const [funnel, setFunnel] = useState<Funnel | undefined>();
  const { busy, error, onSubmit } = useSubmit(async (form) => {
    const flagKey = String(form.get('flagKey') ?? '');
    const steps = String(form.get('steps') ?? '');
    try {
      setFunnel(await call(api.GET('/api/analytics/funnel', { params: { query: { projectId, serviceId, environment, flagKey, steps, period: range } } })));
    } catch (caught) {
      // The form's inputs are query parameters here: their problems belong beside the fields.
      if (!(caught instanceof ApiError)) throw caught;
      throw new ApiError(caught.status, caught.code, caught.message, caught.details.map((d) => ({ ...d, path: d.path.replace(/^query\./, '') })));
    }
  });
  const flagList = flags.data?.flags ?? [];
  return (
    <section aria-labelledby="funnel">
      <h2 id="funnel">Funnel by variant</h2>
      <p className="muted">
        Users of {service?.name ?? 'this service'} in {environment} who did each step in order, split by the value the flag gave them.
      </p>
      <form onSubmit={onSubmit} noValidate className="inline-form metrics-funnel-form">
        <div className="field">
          <label htmlFor="funnel-flag">Flag</label>
          <select id="funnel-flag" name="flagKey" required disabled={!flagList.length}>
            {flagList.length ? (
              flagList.map((f) => (
                <option key={f.key} value={f.key}>
                  {f.key}
                </option>
              ))
            ) : (
              <option value="">{flags.loading ? 'Loading flags…' : 'No flags in this service and environment'}</option>
            )}
          </select>
        </div>
        <Field
          label="Steps"
          name="steps"
          required
          placeholder="signup, add_to_cart, purchase"
          hint="Event names in order, separated by commas (2 to 10): pick from the events this service reported or type any."
          error={error}
          list="funnel-event-names"
          autoComplete="off"
          value={steps}
          onChange={(e) => setSteps(e.target.value)}
        />
        <datalist id="funnel-event-names">
          {stepSuggestions(steps, names.data?.names ?? []).map((s) => (
            <option key={s.value} value={s.value} label={s.label} />
          ))}
        </datalist>
        <FormError error={error} fields={['steps', 'flagKey']} />
        <SubmitButton busy={busy}>Show funnel</SubmitButton>
      </form>
      {funnel && <FunnelTable funnel={funnel} />}
    </section>
  );
}

/**
 * The known event names as completions of the steps typed so far: the steps before the last comma
 * kept, the last one replaced by each name not already a step (a datalist offers whole values).
 */
function stepSuggestions(typed: string, names: { name: string; count: number }[]): { value: string; label: string }[] {
  const cut = typed.lastIndexOf(',');
  const done = cut < 0 ? [] : typed.slice(0, cut).split(',').map((s) => s.trim()).filter(Boolean);
  const prefix = done.length ? `${done.join(', ')}, ` : '';
  return names.filter((n) => !done.includes(n.name)).map((n) => ({ value: `${prefix}${n.name}`, label: `${n.name} (${count(n.count)} events)` }));
}

function FunnelTable({ funnel }: { funnel: Funnel }) {
  const first = funnel.funnelSteps[0];
  if (!funnel.variants.length) return <p role="status">No user of flag {funnel.flagKey} did the first step in this window.</p>;
  return (
    <table className="metrics-funnel">
      <caption>
        Funnel of {funnel.flagKey}: {percent(funnel.overallConversionRate)} of users reached the last step
      </caption>
      <thead>
        <tr>
          <th scope="col">Step</th>
          {funnel.variants.map((v) => (
            <th scope="col" key={v}>
              <code>{v}</code>
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {funnel.funnelSteps.map((step) => (
          <tr key={step.stepIndex}>
            <th scope="row">
              {step.stepIndex + 1}. {step.step}
            </th>
            {funnel.variants.map((v) => {
              const users = step.byVariant[v] ?? 0;
              const start = first?.byVariant[v] ?? 0;
              const share = start ? users / start : 0;
              return (
                <td key={v}>
                  <span className="metrics-bar-cell">
                    <span className="metrics-bar" style={{ width: `${(share * 100).toFixed(1)}%` }} />
                    <span className="metrics-bar-text">
                      {count(users)} ({percent(share)})
                    </span>
                  </span>
                </td>
              );
            })}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function BanditAllocations({ projectId }: { projectId: string }) {
  const experiments = useBanditExperiments(projectId, 50);
  const [chosen, setChosen] = useState<string | undefined>();
  const list = experiments.data?.experiments ?? [];
  const experiment = list.find((e) => e.id === chosen) ?? list[0];
  return (
    <section aria-labelledby="bandits">
      <h2 id="bandits">Bandit allocations</h2>
      <LoadState loading={experiments.loading} error={experiments.error}>
        {experiment ? (
          <>
            {list.length > 1 && (
              <div className="field">
                <label htmlFor="bandit-experiment">Experiment</label>
                <select id="bandit-experiment" value={experiment.id} onChange={(e) => setChosen(e.target.value)}>
                  {list.map((e) => (
                    <option key={e.id} value={e.id}>
                      {e.name} ({e.flagKey}, {e.status})
                    </option>
                  ))}
                </select>
              </div>
            )}
            <ExperimentAllocations experiment={experiment} />
          </>
        ) : (
          <p className="muted">This project has no bandit experiments.</p>
        )}
      </LoadState>
    </section>
  );
}

/** A reallocation writes the flag's weights as a version by `bandit:<id>`: those versions are the allocation history. */
function ExperimentAllocations({ experiment }: { experiment: Experiment }) {
  const { flagKey, serviceId, environment, id } = experiment;
  const history = useFlagHistory(flagKey, { serviceId, environment: asEnvironment(environment), limit: 100 });
  const chart = useMemo(() => {
    const rounds = (history.data?.versions ?? []).filter((v) => v.actor === `bandit:${id}`).reverse();
    const names = experiment.variants.map((v) => v.name);
    const weights = rounds.map((r) => names.map((name) => r.snapshot.variants.find((v) => v.name === name)?.weight ?? null));
    // The latest weights hold until the experiment ended (or now): one more point draws that.
    const end = experiment.endedAt ? Date.parse(experiment.endedAt) : Date.now();
    const times = rounds.map((r) => Date.parse(r.createdAt));
    if (weights.length && end > times[times.length - 1]) {
      times.push(end);
      weights.push(weights[weights.length - 1]);
    }
    return {
      times,
      span: [Math.min(Date.parse(experiment.startedAt), times[0] ?? Infinity), end] as [number, number],
      series: names.map((name, i) => ({ label: name, values: weights.map((w) => w[i]) })),
    };
  }, [history.data, experiment, id]);
  return (
    <>
      <p>
        <strong>{experiment.name}</strong> on <code>{flagKey}</code> ({environment}): {experiment.status}
        {experiment.winner ? `, winner ${experiment.winner}` : ''}. {experiment.rounds} reallocation round{experiment.rounds === 1 ? '' : 's'}
        {experiment.lastReallocatedAt ? `, the last ${timeText(Date.parse(experiment.lastReallocatedAt))}` : ''}.
      </p>
      <table>
        <caption>Current allocation</caption>
        <thead>
          <tr>
            <th scope="col">Variant</th>
            <th scope="col" className="metrics-num">
              Allocation
            </th>
            <th scope="col" className="metrics-num">
              Trials
            </th>
            <th scope="col" className="metrics-num">
              Conversion
            </th>
            <th scope="col" className="metrics-num">
              P(best)
            </th>
          </tr>
        </thead>
        <tbody>
          {experiment.variants.map((v) => (
            <tr key={v.name}>
              <th scope="row">
                <code>{v.name}</code>
              </th>
              <td className="metrics-num">{percent(v.allocation)}</td>
              <td className="metrics-num">{count(v.trials)}</td>
              <td className="metrics-num">{percent(v.conversionRate)}</td>
              <td className="metrics-num">{percent(v.probabilityBest)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <LoadState loading={history.loading} error={history.error}>
        <TimeChart title="Allocation per variant over time (latest 100 flag changes)" times={chart.times} series={chart.series} span={chart.span} stepped format={(v) => `${v.toFixed(0)}%`} />
      </LoadState>
    </>
  );
}
