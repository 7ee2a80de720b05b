/**
 * Counts per category (evaluation reasons, values, funnel users) as a table whose rows carry a
 * bar: the numbers are text, the bar only repeats them for the eye.
 */
export interface BreakdownRow {
  label: string;
  count: number;
}

export function Breakdown({ caption, rows, labelHeading, countHeading = 'Evaluations' }: { caption: string; rows: BreakdownRow[]; labelHeading: string; countHeading?: string }) {
  const total = rows.reduce((sum, r) => sum + r.count, 0);
  const sorted = [...rows].sort((a, b) => b.count - a.count || a.label.localeCompare(b.label));
  if (!sorted.length) return <p className="muted">{caption}: nothing in this window.</p>;
  return (
    <table className="metrics-breakdown">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">{labelHeading}</th>
          <th scope="col" className="metrics-num">
            {countHeading}
          </th>
          <th scope="col">Share</th>
        </tr>
      </thead>
      <tbody>
        {sorted.map((row) => {
          const share = total ? row.count / total : 0;
          return (
            <tr key={row.label}>
              <th scope="row">
                <code>{row.label}</code>
              </th>
              <td className="metrics-num">{row.count.toLocaleString()}</td>
              <td>
                <span className="metrics-bar-cell">
                  <span className="metrics-bar" style={{ width: `${(share * 100).toFixed(1)}%` }} />
                  <span className="metrics-bar-text">{percent(share)}</span>
                </span>
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** 0-1 as a percentage with precision where it matters (0.05% is not 0%). */
export function percent(ratio: number): string {
  const p = ratio * 100;
  if (p === 0) return '0%';
  if (p < 0.1) return '<0.1%';
  return `${p < 10 ? p.toFixed(1) : p.toFixed(0)}%`;
}
