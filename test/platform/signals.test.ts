import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ANY_FREE_PORTS } from '../../api/config';
import { projectPath } from '../../api/infra/paths';
import { eventually } from '../support/harness';

// A stop asked for while the process starts (docs/operations.md#faults-and-recovery): the start
// finishes, then everything stops as on any SIGTERM, the Temporal dev server of the embedded
// profile included, and the process exits 0.
it('stops cleanly, its Temporal dev server with it, on a SIGTERM during start-up', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flags-signals-'));
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, ...ANY_FREE_PORTS, LOG_LEVEL: 'info' };
  // The embedded profile: no backend URL, so the app starts its own Temporal dev server.
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'TEMPORAL_ADDRESS', 'CLICKHOUSE_URL']) delete env[name];
  const child = spawn(process.execPath, ['--import', 'tsx', projectPath('api/main.ts')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const devServerRunning = () => spawnSync('pgrep', ['-f', `${dataDir}/temporal.sqlite`]).status === 0;
  try {
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`exited early: ${output.slice(-2000)}`);
      return output.includes('starting local Temporal dev server');
    }, 120_000, 50);
    child.kill('SIGTERM');
    expect(await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 120_000))])).toBe(0);
    expect(output).toContain('stopping once started');
    expect(output).toContain('stopped cleanly');
    await eventually(async () => !devServerRunning(), 10_000);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    spawnSync('pkill', ['-f', `${dataDir}/temporal.sqlite`]);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 300_000);
