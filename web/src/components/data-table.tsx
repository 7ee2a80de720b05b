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
  rowKey(row: Row): string | number;
  /** Shown instead of the table when `rows` is empty. */
  empty: ReactNode;
  /** The scrolling frame's class (settings and release pages style theirs apart). */
  frame?: string;
}

export function DataTable<Row>({ caption, columns, rows, rowKey, empty, frame = 'st-scroll' }: Props<Row>) {
  if (!rows.length) return <p>{empty}</p>;
  return (
    <div className={frame}>
      <table>
        <caption className="visually-hidden">{caption}</caption>
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
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((column) => (
                <td key={column.header} className={column.className}>
                  {column.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
