/**
 * The console's table: a caption for screen readers, column headers with scope, one row per item
 * and, when there are no rows, a sentence saying so instead of an empty grid.
 */
import type { ReactNode } from 'react';

export interface Column<Row> {
  header: string;
  /** The header is read out but not shown (an actions column). */
  hideHeader?: boolean;
  className?: string;
  cell(row: Row): ReactNode;
}

interface Props<Row> {
  caption: string;
  columns: Column<Row>[];
  rows: readonly Row[];
  rowKey(row: Row, index: number): string | number;
  /** Shown instead of the table when `rows` is empty. */
  empty: ReactNode;
  /** The class of the scrolling frame around the table (settings and release pages style theirs apart); null for none. */
  frame?: string | null;
  /** The caption is shown (otherwise only read out: the section's heading already says it). */
  captionShown?: boolean;
  className?: string;
}

export function DataTable<Row>({ caption, columns, rows, rowKey, empty, frame = 'st-scroll', captionShown = false, className }: Props<Row>) {
  if (!rows.length) return <p>{empty}</p>;
  const table = (
    <table className={className}>
      <caption className={captionShown ? undefined : 'visually-hidden'}>{caption}</caption>
      <thead>
        <tr>
          {columns.map((column) => (
            <th key={column.header} scope="col">
              {column.hideHeader ? <span className="visually-hidden">{column.header}</span> : column.header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row, index) => (
          <tr key={rowKey(row, index)}>
            {columns.map((column) => (
              <td key={column.header} className={column.className}>
                {column.cell(row)}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
  return frame === null ? table : <div className={frame}>{table}</div>;
}
