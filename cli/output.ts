/** How a command reports: JSON only on stdout with --json, else lines and tables for people. */
export interface Output {
  json: boolean;
  /** The command's result: printed as JSON, or by `human` for people. */
  result(value: unknown, human: () => void): void;
  /** A line for people on stdout (results). */
  line(text: string): void;
  /** Progress and notes on stderr (never mixed into results). */
  say(text: string): void;
}

export function createOutput(json: boolean): Output {
  return {
    json,
    result(value, human) {
      if (json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
      else human();
    },
    line: (text) => process.stdout.write(`${text}\n`),
    say: (text) => process.stderr.write(`${text}\n`),
  };
}

/** Columns padded to their widest cell. */
export function table(rows: Record<string, string>[], columns: string[]): string {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? '').length)));
  const format = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i])).join('  ').trimEnd();
  return [format(columns.map((c) => c.toUpperCase())), ...rows.map((r) => format(columns.map((c) => r[c] ?? '')))].join('\n');
}

/** A value as people read it: strings bare, everything else as JSON. */
export const show = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));
