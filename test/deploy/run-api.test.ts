/**
 * scripts/run-api.sh, the one place that decides the API process's node flags (docs/operations.md,
 * One CPU): a larger young generation where it ingests, V8's collector on the JavaScript thread
 * where it has one CPU on Node 20; and the flags it gives are ones this node accepts.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { projectPath } from '../../api/infra/paths';

const run = promisify(execFile);
const SCRIPT = projectPath('scripts', 'run-api.sh');

/** The flags for `roles` (ROLES unset if none), run on CPU 0 alone or on CPUs 0 and 1 (the suite's machines have two). */
async function flagsFor(opts: { roles?: string; args?: string[]; oneCpu?: boolean; nodeMajor?: number }): Promise<string[]> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (opts.nodeMajor !== undefined) env.PATH = `${fakeNode(opts.nodeMajor)}${path.delimiter}${env.PATH ?? ''}`;
  delete env.ROLES;
  if (opts.roles !== undefined) env.ROLES = opts.roles;
  const script = ['sh', SCRIPT, ...(opts.args ?? []), '--print-node-flags'];
  const [command, ...args] = ['taskset', '-c', opts.oneCpu ? '0' : '0,1', ...script];
  const { stdout } = await run(command, args, { env });
  return stdout.split(/\s+/).filter(Boolean);
}

const fakeNodeDirs: string[] = [];
afterAll(() => fakeNodeDirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

/** A directory whose `node` answers the script's question about its major version with `major`. */
function fakeNode(major: number): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `fake-node-${major}-`));
  fakeNodeDirs.push(dir);
  fs.writeFileSync(path.join(dir, 'node'), `#!/bin/sh\necho ${major}\n`, { mode: 0o755 });
  return dir;
}

describe('scripts/run-api.sh node flags', () => {
  it('gives an ingesting process (the default roles: all) the larger young generation, and a data plane none', async () => {
    expect(await flagsFor({})).toEqual(['--max-semi-space-size=64']);
    expect(await flagsFor({ roles: 'control,ingest' })).toEqual(['--max-semi-space-size=64']);
    expect(await flagsFor({ roles: 'data' })).toEqual([]);
    // --roles= on the command line wins over ROLES, as dist/api/main.js reads it.
    expect(await flagsFor({ roles: 'data', args: ['--roles=ingest'] })).toEqual(['--max-semi-space-size=64']);
  });

  it('runs the collector on the JavaScript thread of a process confined to one CPU on Node 20 only', async () => {
    expect(await flagsFor({ roles: 'data', oneCpu: true, nodeMajor: 20 })).toEqual(['--single-threaded-gc']);
    expect(await flagsFor({ oneCpu: true, nodeMajor: 20 })).toEqual(['--max-semi-space-size=64', '--single-threaded-gc']);
    expect(await flagsFor({ roles: 'data', nodeMajor: 20 })).toEqual([]);
    // Node 22 and later (the production image's 24) spend less CPU with the collector's helper threads.
    expect(await flagsFor({ roles: 'data', oneCpu: true, nodeMajor: 24 })).toEqual([]);
    expect(await flagsFor({ oneCpu: true, nodeMajor: 22 })).toEqual(['--max-semi-space-size=64']);
  });

  it('gives only flags this node accepts', async () => {
    const flags = await flagsFor({ oneCpu: true });
    const { stdout } = await run(process.execPath, [...flags, '-e', 'process.stdout.write("ran")']);
    expect(stdout).toBe('ran');
  });
});
