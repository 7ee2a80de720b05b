/**
 * Rates with their intervals as horizontal bars (one row per category, e.g. a flag's variants):
 * the bar is the rate, the whisker its interval. An SVG sized by the rows; the numbers are in the
 * text alternative and in the table the page shows beside it. Colours come through style
 * properties (set by script, which the CSP allows), so the chart follows the colour scheme.
 */
export interface IntervalRow {
  label: string;
  rate: number;
  interval: { low: number; high: number } | null;
}

const ROW_HEIGHT = 28;
const LABEL_WIDTH = 120;
const PLOT_WIDTH = 400;
const VALUE_WIDTH = 200;
const FONT_SIZE = 13;

export function IntervalChart({ title, rows, format }: { title: string; rows: IntervalRow[]; format: (rate: number) => string }) {
  const max = Math.max(...rows.map((r) => Math.max(r.rate, r.interval?.high ?? 0)), 0.01);
  const x = (rate: number) => LABEL_WIDTH + (rate / max) * PLOT_WIDTH;
  const intervalText = (r: IntervalRow) => (r.interval ? `${format(r.interval.low)} to ${format(r.interval.high)}` : 'no interval');
  const description = rows.map((r) => `${r.label}: ${format(r.rate)} (95% interval ${intervalText(r)})`).join('; ');
  const height = rows.length * ROW_HEIGHT + 8;
  return (
    <figure className="time-chart">
      <figcaption className="time-chart-title">{title}</figcaption>
      <svg role="img" aria-label={`${title}. ${description}.`} viewBox={`0 0 ${LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH} ${height}`} width="100%" data-testid="interval-chart">
        {rows.map((r, i) => {
          const y = 4 + i * ROW_HEIGHT;
          const middle = y + ROW_HEIGHT / 2;
          return (
            <g key={r.label} data-variant={r.label}>
              <text x={LABEL_WIDTH - 8} y={middle} textAnchor="end" dominantBaseline="middle" fontSize={FONT_SIZE} style={{ fill: 'var(--text)' }}>
                {r.label}
              </text>
              <rect className="interval-bar" x={LABEL_WIDTH} y={y + 6} width={Math.max(x(r.rate) - LABEL_WIDTH, 1)} height={ROW_HEIGHT - 12} style={{ fill: 'var(--chart-1)', opacity: 0.5 }} />
              {r.interval && (
                <g className="interval-whisker" style={{ stroke: 'var(--chart-2)', strokeWidth: 2 }}>
                  <line x1={x(r.interval.low)} x2={x(r.interval.high)} y1={middle} y2={middle} />
                  <line x1={x(r.interval.low)} x2={x(r.interval.low)} y1={y + 4} y2={y + ROW_HEIGHT - 4} />
                  <line x1={x(r.interval.high)} x2={x(r.interval.high)} y1={y + 4} y2={y + ROW_HEIGHT - 4} />
                </g>
              )}
              <text x={LABEL_WIDTH + PLOT_WIDTH + 8} y={middle} dominantBaseline="middle" fontSize={FONT_SIZE} style={{ fill: 'var(--muted)' }}>
                {`${format(r.rate)} (${intervalText(r)})`}
              </text>
            </g>
          );
        })}
      </svg>
    </figure>
  );
}
