/**
 * One time-series chart on uPlot, used by every metrics page: lines over time, vertical markers
 * (a flag toggled or changed), a legend with the values under the cursor, a text summary for
 * screen readers and a data table behind a toggle. The plot's height is fixed and new data goes
 * through setData, so a live refresh never moves the page.
 *
 * Only the lazy metrics pages import this module: uPlot (and its stylesheet, bundled by Vite as a
 * file, since the CSP forbids inline styles) stays out of the first load.
 */
import { useEffect, useId, useMemo, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  /** One per time; null where there is no value (a gap in the line). */
  values: (number | null)[];
}

export interface ChartMarker {
  /** Epoch milliseconds. */
  at: number;
  /** What happened, e.g. "Turned off by ada@example.com". */
  label: string;
}

export interface TimeChartProps {
  /** The chart's caption (also names its data table). */
  title: string;
  /** Epoch milliseconds, ascending, one per point. */
  times: number[];
  series: ChartSeries[];
  /** Shows a value with its unit (axis, legend, summary, table). */
  format: (value: number) => string;
  markers?: ChartMarker[];
  /** Plot height in CSS pixels: reserved before data arrives. */
  height?: number;
  /**
   * The time span shown, epoch ms; default the first to the last time. A window's end lies past
   * its last point's start (the current bucket is still filling): a change made in it shows there.
   */
  span?: [number, number];
  /** Values hold until the next point (allocations), instead of changing along a line. */
  stepped?: boolean;
}

const SERIES_COLOURS = 4;
/** One empty list: a new `[]` each render would redraw the plot on every cursor move. */
const NO_MARKERS: ChartMarker[] = [];
const steps = uPlot.paths.stepped!({ align: 1 });

export function TimeChart({ title, times, series, format, markers = NO_MARKERS, height = 220, span, stepped = false }: TimeChartProps) {
  const id = useId();
  const plotRef = useRef<HTMLDivElement>(null);
  const chartRef = useRef<uPlot | undefined>(undefined);
  // The plot's hooks read these at draw time: new props never rebuild the plot.
  const formatRef = useRef(format);
  const markersRef = useRef(markers);
  const spanRef = useRef(span);
  formatRef.current = format;
  markersRef.current = markers;
  spanRef.current = span;
  const [hoverIndex, setHoverIndex] = useState<number | null>(null);
  const [tableShown, setTableShown] = useState(false);
  const colours = useChartColours();
  const data = useMemo<uPlot.AlignedData>(() => [times, ...series.map((s) => s.values)], [times, series]);
  const dataRef = useRef(data);
  dataRef.current = data;
  const shape = series.map((s) => s.label).join('\u0000');

  useEffect(() => {
    const el = plotRef.current;
    if (!el || !colours) return;
    const axis = { stroke: colours.muted, grid: { stroke: colours.grid, width: 1 }, ticks: { stroke: colours.grid, width: 1 } };
    const chart = new uPlot(
      {
        width: Math.max(el.clientWidth, 200),
        height,
        ms: 1,
        legend: { show: false },
        cursor: { drag: { x: false, y: false }, points: { size: 6 } },
        scales: { x: { time: true, range: (_u, min, max) => spanRef.current ?? [min, max] }, y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
        axes: [axis, { ...axis, size: 72, values: (_u, ticks) => ticks.map((t) => formatRef.current(t)) }],
        series: [{}, ...shape.split('\u0000').map((label, i) => ({ label, stroke: colours.series[i % SERIES_COLOURS], width: 2, points: { show: true, size: 7, fill: colours.series[i % SERIES_COLOURS], filter: isolatedPoints }, ...(stepped ? { paths: steps } : {}) }))],
        hooks: {
          draw: [(u) => drawMarkers(u, markersRef.current, colours.marker)],
          setCursor: [(u) => setHoverIndex(u.cursor.idx ?? null)],
        },
      },
      dataRef.current,
      el,
    );
    chartRef.current = chart;
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(el.clientWidth, 200), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      chart.destroy();
      chartRef.current = undefined;
    };
  }, [shape, height, colours, stepped]);

  useEffect(() => {
    chartRef.current?.setData(data);
  }, [data]);

  useEffect(() => {
    chartRef.current?.redraw(false, false);
  }, [markers]);

  const summary = summarize(times, series, format, markers);
  const shownIndex = hoverIndex ?? lastIndex(times);
  return (
    <figure className="time-chart" aria-labelledby={`${id}-title`}>
      <figcaption id={`${id}-title`} className="time-chart-title">
        {title}
      </figcaption>
      <div ref={plotRef} className="time-chart-plot" style={{ height }} role="img" aria-label={`${title}. ${summary}`} />
      <ul className="time-chart-legend" aria-hidden="true">
        <li className="time-chart-when">{shownIndex === undefined ? '—' : timeText(times[shownIndex])}</li>
        {series.map((s, i) => (
          <li key={s.label}>
            <span className="time-chart-swatch" style={colours ? { background: colours.series[i % SERIES_COLOURS] } : undefined} />
            {s.label}: <strong>{shownIndex === undefined ? '—' : valueText(s.values[shownIndex], format)}</strong>
          </li>
        ))}
      </ul>
      <button
        type="button"
        className="metrics-link-button"
        aria-label={`${tableShown ? 'Hide' : 'Show'} data table: ${title}`}
        aria-expanded={tableShown}
        aria-controls={`${id}-table`}
        onClick={() => setTableShown((v) => !v)}
      >
        {tableShown ? 'Hide data table' : 'Show data table'}
      </button>
      <div id={`${id}-table`} hidden={!tableShown} className="time-chart-table">
        {tableShown && (
          <table>
            <caption>{title}</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                {series.map((s) => (
                  <th scope="col" key={s.label}>
                    {s.label}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {times.map((t, row) => (
                <tr key={t}>
                  <th scope="row">{timeText(t)}</th>
                  {series.map((s) => (
                    <td key={s.label}>{valueText(s.values[row], format)}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </figure>
  );
}

interface ChartColours {
  series: string[];
  marker: string;
  muted: string;
  grid: string;
}

/**
 * The chart's colours from the stylesheet's variables (light or dark scheme), read after mount and
 * again when the scheme changes: a canvas cannot use CSS variables itself.
 */
function useChartColours(): ChartColours | undefined {
  const [colours, setColours] = useState<ChartColours | undefined>();
  useEffect(() => {
    const read = () => {
      const style = getComputedStyle(document.documentElement);
      const v = (name: string) => style.getPropertyValue(name).trim();
      setColours({
        series: Array.from({ length: SERIES_COLOURS }, (_, i) => v(`--chart-${i + 1}`)),
        marker: v('--chart-marker'),
        muted: v('--muted'),
        grid: v('--border'),
      });
    };
    read();
    const scheme = window.matchMedia('(prefers-color-scheme: dark)');
    scheme.addEventListener('change', read);
    return () => scheme.removeEventListener('change', read);
  }, []);
  return colours;
}

/** Dashed vertical lines at the markers inside the plotted range, numbered like the page's list of changes. */
function drawMarkers(u: uPlot, markers: ChartMarker[], colour: string) {
  if (!markers.length) return;
  const { ctx, bbox } = u;
  const ratio = uPlot.pxRatio;
  const [min, max] = [u.scales.x.min ?? 0, u.scales.x.max ?? 0];
  ctx.save();
  ctx.strokeStyle = colour;
  ctx.fillStyle = colour;
  ctx.lineWidth = 2 * ratio;
  ctx.setLineDash([5 * ratio, 4 * ratio]);
  ctx.font = `${12 * ratio}px system-ui, sans-serif`;
  ctx.textBaseline = 'top';
  let previous = { x: -Infinity, row: 0 };
  markers.forEach((marker, i) => {
    if (marker.at < min || marker.at > max) return;
    const x = Math.round(u.valToPos(marker.at, 'x', true));
    ctx.beginPath();
    ctx.moveTo(x, bbox.top);
    ctx.lineTo(x, bbox.top + bbox.height);
    ctx.stroke();
    // Numbers of changes close together go one under the other instead of over each other.
    const row = x - previous.x < 16 * ratio ? previous.row + 1 : 0;
    ctx.fillText(String(i + 1), x + 3 * ratio, bbox.top + (2 + row * 14) * ratio);
    previous = { x, row };
  });
  ctx.restore();
}

/** Dots only where a value has no neighbour to draw a line to (a lone bucket with traffic). */
function isolatedPoints(u: uPlot, seriesIdx: number): number[] {
  const values = u.data[seriesIdx];
  const lone: number[] = [];
  values.forEach((v, i) => {
    if (v !== null && v !== undefined && (values[i - 1] ?? null) === null && (values[i + 1] ?? null) === null) lone.push(i);
  });
  return lone;
}

function lastIndex(times: number[]): number | undefined {
  return times.length ? times.length - 1 : undefined;
}

export function timeText(ms: number): string {
  return new Date(ms).toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

function valueText(value: number | null | undefined, format: (v: number) => string): string {
  return value === null || value === undefined ? 'no data' : format(value);
}

/** What the chart shows, in words: each line's latest value and its peak, and the markers. */
function summarize(times: number[], series: ChartSeries[], format: (v: number) => string, markers: ChartMarker[]): string {
  if (!times.length) return 'No data yet.';
  const parts = series.map((s) => {
    let peak: number | undefined;
    let latest: number | undefined;
    s.values.forEach((v, i) => {
      if (v === null) return;
      if (peak === undefined || v > (s.values[peak] ?? -Infinity)) peak = i;
      latest = i;
    });
    if (peak === undefined || latest === undefined) return `${s.label}: no data`;
    return `${s.label}: latest ${format(s.values[latest]!)}, highest ${format(s.values[peak]!)} at ${timeText(times[peak])}`;
  });
  const from = timeText(times[0]);
  const to = timeText(times[times.length - 1]);
  const marked = markers.length ? ` ${markers.length} marked change${markers.length === 1 ? '' : 's'}.` : '';
  return `From ${from} to ${to}. ${parts.join('; ')}.${marked}`;
}
