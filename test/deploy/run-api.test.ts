/**
 * scripts/run-api.sh, the one place that decides the API process's node flags (docs/operations.md,
 * One CPU): a larger young generation where it ingests, V8's collector on the JavaScript thread
 * where it has one CPU; and the flags it gives are ones this node accepts.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { projectPath } from '../../api/infra/paths';

const run = promisify(execFile);
const SCRIPT = projectPath('scripts', 'run-api.sh');

/** The flags for `roles` (ROLES unset if none), run on CPU 0 alone or on CPUs 0 and 1 (the suite's machines have two). */
async function flagsFor(opts: { roles?: string; args?: string[]; oneCpu?: boolean }): Promise<string[]> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.ROLES;
  if (opts.roles !== undefined) env.ROLES = opts.roles;
  const script = ['sh', SCRIPT, ...(opts.args ?? []), '--print-node-flags'];
  const [command, ...args] = ['taskset', '-c', opts.oneCpu ? '0' : '0,1', ...script];
  const { stdout } = await run(command, args, { env });
  return stdout.split(/\s+/).filter(Boolean);
}

describe('scripts/run-api.sh node flags', () => {
  it('gives an ingesting process (the default roles: all) the larger young generation, and a data plane none', async () => {
    expect(await flagsFor({})).toEqual(['--max-semi-space-size=64']);
    expect(await flagsFor({ roles: 'control,ingest' })).toEqual(['--max-semi-space-size=64']);
    expect(await flagsFor({ roles: 'data' })).toEqual([]);
    // --roles= on the command line wins over ROLES, as dist/api/main.js reads it.
    expect(await flagsFor({ roles: 'data', args: ['--roles=ingest'] })).toEqual(['--max-semi-space-size=64']);
  });

  it('runs the collector on the JavaScript thread of a process confined to one CPU', async () => {
    expect(await flagsFor({ roles: 'data', oneCpu: true })).toEqual(['--single-threaded-gc']);
    expect(await flagsFor({ oneCpu: true })).toEqual(['--max-semi-space-size=64', '--single-threaded-gc']);
  });

  it('gives only flags this node accepts', async () => {
    const flags = await flagsFor({ oneCpu: true });
    const { stdout } = await run(process.execPath, [...flags, '-e', 'process.stdout.write("ran")']);
    expect(stdout).toBe('ran');
  });
});
