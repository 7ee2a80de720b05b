/**
 * A flag's conversion per variant (GET /api/analytics/flags/{key}/variants): outcome events
 * attributed to each value over its evaluations, with the Wilson 95% interval the API gives
 * (docs/analytics.md#conversions-and-attribution), as a table and as bars with interval whiskers.
 * The conversion event is any event but error and latency, or one the project reported.
 */
import { useId, useState } from 'react';
import { useEventNames, useFlagVariants } from '../../api/resources';
import { percent } from '../../components/metrics/breakdown';
import { IntervalChart } from '../../components/metrics/interval-chart';
import { LoadState } from '../../components/status';
import { count, type Environment, type FlagVariants, type WindowName } from './shared';

/** Outcome names that are never conversions (docs/api-reference.md#outcome-events). */
const RESERVED_OUTCOMES = new Set(['error', 'latency']);

export function VariantConversions({ projectId, flagKey, serviceId, environment, range }: { projectId: string; flagKey: string; serviceId: string; environment: Environment; range: WindowName }) {
  const [eventName, setEventName] = useState('');
  const names = useEventNames({ projectId, serviceId });
  const variants = useFlagVariants(flagKey, { projectId, serviceId, environment, period: range, ...(eventName ? { eventName } : {}) });
  const eventId = useId();
  const conversionNames = (names.data?.names ?? []).filter((n) => !RESERVED_OUTCOMES.has(n.name));
  return (
    <section aria-labelledby="flag-conversions">
      <h2 id="flag-conversions">Conversion by variant</h2>
      <div className="field">
        <label htmlFor={eventId}>Conversion event</label>
        <select id={eventId} value={eventName} onChange={(e) => setEventName(e.target.value)}>
          <option value="">Any event but error and latency</option>
          {conversionNames.map((n) => (
            <option key={n.name} value={n.name}>
              {n.name}
            </option>
          ))}
        </select>
      </div>
      <LoadState loading={variants.loading} error={variants.error}>
        {variants.data && <VariantTable report={variants.data} />}
      </LoadState>
    </section>
  );
}

function VariantTable({ report }: { report: FlagVariants }) {
  if (!report.totalConversions) {
    return (
      <p className="muted" role="status">
        No outcome events attributed to this flag in this window: SDKs send them with POST /api/analytics/track.
      </p>
    );
  }
  const interval = (v: FlagVariants['variants'][number]) => (v.conversionInterval ? `${percent(v.conversionInterval.low)} – ${percent(v.conversionInterval.high)}` : '—');
  return (
    <>
      {/* Five columns: on a phone the table scrolls in its box instead of widening the page. */}
      <div className="table-scroll">
        <table>
          <caption>Conversion by variant ({percent(report.overallConversionRate)} overall)</caption>
          <thead>
            <tr>
              <th scope="col">Variant</th>
              <th scope="col" className="metrics-num">
                Evaluations
              </th>
              <th scope="col" className="metrics-num">
                Conversions
              </th>
              <th scope="col" className="metrics-num">
                Conversion rate
              </th>
              <th scope="col">95% interval</th>
            </tr>
          </thead>
          <tbody>
            {report.variants.map((v) => (
              <tr key={v.variant}>
                <th scope="row">
                  <code>{v.variant}</code>
                </th>
                <td className="metrics-num">{count(v.evaluations)}</td>
                <td className="metrics-num">{count(v.conversions)}</td>
                <td className="metrics-num">{percent(v.conversionRate)}</td>
                <td>{interval(v)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <IntervalChart
        title="Conversion rate per variant with 95% interval"
        rows={report.variants.map((v) => ({ label: v.variant, rate: v.conversionRate, interval: v.conversionInterval }))}
        format={percent}
      />
    </>
  );
}
