import { execFileSync } from 'node:child_process';

/** What the side-by-side benches share: pinning the load generator, and how figures are summarized and printed. */

/** Pins this process (the load generator) to one CPU with taskset; false where taskset is absent. */
export function pinSelf(cpu: number): boolean {
  try {
    execFileSync('taskset', ['-a', '-cp', String(cpu), String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The lower median. */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
