import os from 'node:os';
import path from 'node:path';

const PREFIX = 'flags-test-chdb-';

/** The chDB path every app and analytics test of one jest worker shares (one engine per process). */
export const workerChdbPath = (pid: number = process.pid): string => path.join(os.tmpdir(), `${PREFIX}${pid}`);

/** The jest worker pid a chDB path under os.tmpdir() belongs to, or undefined for any other entry. */
export function chdbPathPid(entry: string): number | undefined {
  const match = new RegExp(`^${PREFIX}(\\d+)$`).exec(entry);
  return match ? Number(match[1]) : undefined;
}
