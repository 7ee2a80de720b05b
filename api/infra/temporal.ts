import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Client, Connection, WorkflowClientInterceptor, WorkflowHandle, WorkflowStartOptions } from '@temporalio/client';
import type { SignalDefinition, UpdateDefinition } from '@temporalio/common';
import type { WorkflowMessage } from '../../workflows/messages';
import { BackendUnavailableError, currentDeadline } from './deadline';
import type { Logger } from './logger';

export interface Temporal {
  client: Client;
  address: string;
  namespace: string;
  taskQueue: string;
  /** Set when this process started its own dev server (embedded profile). */
  devServer: boolean;
  /** False in processes that do not use Temporal at all (see detachedTemporal). */
  connected: boolean;
  /**
   * Runs Temporal calls with a deadline: the request's (api/infra/deadline.ts) or callTimeoutMs
   * from now, whichever comes first, so a Temporal that does not answer fails the call with 503.
   */
  bounded<T>(call: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface TemporalOptions {
  address?: string;
  namespace: string;
  taskQueue: string;
  cliPath: string;
  dataDir: string;
  /** Bound of one call outside a request (a request's own deadline bounds it inside one). */
  callTimeoutMs: number;
  logger: Logger;
  /** Workflow client interceptors, e.g. tracing's, which carry the caller's trace into the workflow. */
  interceptors?: WorkflowClientInterceptor[];
}

/**
 * Connects to TEMPORAL_ADDRESS, or starts `temporal server start-dev` with a SQLite file under
 * DATA_DIR and stops it again on close. The dev server is a real Temporal server, so workflow
 * code is exercised exactly as in production.
 */
export async function openTemporal(opts: TemporalOptions): Promise<Temporal> {
  let child: ChildProcess | undefined;
  let address = opts.address;
  if (!address) {
    const port = await freePort();
    address = `127.0.0.1:${port}`;
    child = startDevServer(opts, port);
  }
  // Loaded here, not at import: a process without the control or worker role never needs the client
  // (with its protobuf definitions, about 9 MB of heap; docs/operations.md#resource-use-at-idle).
  const { Client, Connection } = await import('@temporalio/client');
  const connection = await connectWithRetry(Connection, address, child, opts.logger);
  const client = new Client({ connection, namespace: opts.namespace, interceptors: { workflow: opts.interceptors ?? [] } });
  return {
    client,
    address,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    devServer: Boolean(child),
    connected: true,
    bounded: (call) => boundedCall(client, opts.callTimeoutMs, call),
    async close() {
      await connection.close();
      if (child) await stopChild(child);
    },
  };
}

/**
 * For processes that run neither the control plane nor the worker (a lone data plane or
 * ingest listener): they never start workflows, and a Temporal connection would slow their
 * hot path (it switches on process-wide promise tracking). Any use is a wiring bug and fails loudly.
 */
export function detachedTemporal(opts: Pick<TemporalOptions, 'namespace' | 'taskQueue'>): Temporal {
  return {
    get client(): Client {
      throw new Error('Temporal is not opened in a process without the control or worker role');
    },
    address: '',
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    devServer: false,
    connected: false,
    bounded: (call) => call(),
    close: async () => undefined,
  };
}

async function boundedCall<T>(client: Client, callTimeoutMs: number, call: () => Promise<T>): Promise<T> {
  const deadline = Math.min(currentDeadline()?.at ?? Infinity, Date.now() + callTimeoutMs);
  try {
    return await client.withDeadline(deadline, call);
  } catch (error) {
    if (Date.now() >= deadline) throw new BackendUnavailableError('temporal', 'Temporal did not answer in time', { cause: error });
    throw error;
  }
}

/** A started workflow's handle, typed by its message. */
export type StartedWorkflow<Input, Result> = WorkflowHandle<(input: Input) => Promise<Result>>;

/**
 * Starts `workflow` on this process's task queue once its input passed the workflow's schema
 * (workflows/messages.ts). Every start goes through here, so an input the workflow cannot take
 * fails in the caller instead of as a started workflow.
 */
export async function startWorkflow<Input, Result>(
  temporal: Temporal,
  workflow: WorkflowMessage<Input, Result>,
  input: Input,
  options: Omit<WorkflowStartOptions, 'args' | 'taskQueue'>,
): Promise<StartedWorkflow<Input, Result>> {
  // Checked before the client is touched: a bad input fails even where Temporal is not opened.
  const checked = checkInput(workflow, input);
  return temporal.bounded(() =>
    temporal.client.workflow.start<(input: Input) => Promise<Result>>(workflow.name, {
      ...options,
      taskQueue: temporal.taskQueue,
      args: [checked],
    }),
  );
}

/**
 * Signals a workflow, starting it with `input` first when it is not running: one call, so a
 * signal is never lost between a check and a start. The input is checked like startWorkflow's.
 */
export async function signalWithStartWorkflow<Input, Result, SignalArg>(
  temporal: Temporal,
  workflow: WorkflowMessage<Input, Result>,
  input: Input,
  options: { workflowId: string; signal: SignalDefinition<[SignalArg]>; signalArgs: [SignalArg] },
): Promise<void> {
  const checked = checkInput(workflow, input);
  await temporal.bounded(() =>
    temporal.client.workflow.signalWithStart<(input: Input) => Promise<Result>, [SignalArg]>(workflow.name, {
      workflowId: options.workflowId,
      signal: options.signal,
      signalArgs: options.signalArgs,
      taskQueue: temporal.taskQueue,
      args: [checked],
    }),
  );
}

/**
 * Starts `workflow` and sends it `update` in one call, answering the update's result: the caller
 * gets what the workflow did first instead of polling for it. Fails with
 * WorkflowExecutionAlreadyStartedError when a workflow with that id is running. The input is
 * checked like startWorkflow's.
 */
export async function startWorkflowWithUpdate<Input, Result, UpdateResult>(
  temporal: Temporal,
  workflow: WorkflowMessage<Input, Result>,
  input: Input,
  options: { workflowId: string; update: UpdateDefinition<UpdateResult, []> },
): Promise<UpdateResult> {
  const checked = checkInput(workflow, input);
  // The update waits as long as the workflow takes to answer, so the call itself has no short
  // bound: a Temporal that is not there must fail first, within the usual one (a 503 in seconds).
  await temporal.bounded(() => temporal.client.workflowService.getSystemInfo({}));
  const { WithStartWorkflowOperation } = await import('@temporalio/client');
  const startWorkflowOperation = new WithStartWorkflowOperation<(input: Input) => Promise<Result>>(workflow.name, {
    workflowId: options.workflowId,
    taskQueue: temporal.taskQueue,
    args: [checked],
    workflowIdConflictPolicy: 'FAIL',
  });
  return temporal.client.workflow.executeUpdateWithStart(options.update, { startWorkflowOperation });
}

function checkInput<Input, Result>(workflow: WorkflowMessage<Input, Result>, input: Input): Input {
  const checked = workflow.input.safeParse(input);
  if (!checked.success) {
    throw new Error(`invalid input for workflow ${workflow.name}: ${checked.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')}`);
  }
  return checked.data;
}

/**
 * Marks a dev server database whose task queues have one partition. Temporal's default is four,
 * each with its own manager syncing to the database; one halves the idle server's CPU with what a
 * single process dispatches. A database made with four partitions keeps them: lowering the read
 * partitions would strand the tasks waiting in the others (docs/operations.md#resource-use-at-idle).
 */
const SINGLE_PARTITION_MARKER = 'task-queues-single-partition';

/** The dev server's partition settings for the database at `database` (marking a new one). */
export function devServerPartitionArgs(database: string): string[] {
  const marker = path.join(path.dirname(database), SINGLE_PARTITION_MARKER);
  if (!fs.existsSync(database)) fs.writeFileSync(marker, '');
  return fs.existsSync(marker)
    ? ['--dynamic-config-value', 'matching.numTaskqueueReadPartitions=1', '--dynamic-config-value', 'matching.numTaskqueueWritePartitions=1']
    : [];
}

function startDevServer(opts: TemporalOptions, port: number): ChildProcess {
  fs.mkdirSync(opts.dataDir, { recursive: true });
  const database = path.join(opts.dataDir, 'temporal.sqlite');
  const args = [
    'server', 'start-dev',
    '--ip', '127.0.0.1',
    '--port', String(port),
    '--headless',
    '--db-filename', database,
    '--namespace', opts.namespace,
    '--log-level', 'error',
    // WAL without an fsync per commit: a start went from 60-300 ms to under 10 ms (bench:propagation).
    // A killed process loses nothing (the OS has the pages); only a power cut may drop the last commits.
    '--sqlite-pragma', 'journal_mode=wal',
    '--sqlite-pragma', 'synchronous=normal',
    // Activities a workflow task schedules come back in that task's answer instead of a separate poll.
    '--dynamic-config-value', 'system.enableActivityEagerExecution=true',
    ...devServerPartitionArgs(database),
    // Namespaces are created at launch only; reading them back every few seconds was most of the rest.
    '--dynamic-config-value', 'system.namespaceCacheRefreshInterval="60s"',
  ];
  opts.logger.info({ cli: opts.cliPath, port }, 'starting local Temporal dev server');
  // Go collects when its heap doubles by default; at half that the server keeps about 10 MB less
  // after a few hundred workflows, at no idle CPU we could measure (docs/operations.md#resource-use-at-idle).
  const env = { ...process.env, GOGC: process.env.GOGC ?? '50' };
  const child = spawn(opts.cliPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  child.stderr?.on('data', (chunk: Buffer) => opts.logger.debug({ temporal: chunk.toString().trim() }, 'temporal dev server'));
  child.on('error', (error) => opts.logger.error({ err: error }, 'Temporal dev server failed to start; set TEMPORAL_CLI_PATH or TEMPORAL_ADDRESS'));
  return child;
}

async function connectWithRetry(connector: typeof Connection, address: string, child: ChildProcess | undefined, logger: Logger): Promise<Connection> {
  const deadline = Date.now() + 60_000;
  for (let attempt = 0; ; attempt++) {
    if (child && child.exitCode !== null) throw new Error(`Temporal dev server exited with code ${child.exitCode}`);
    try {
      const connection = await connector.connect({ address, connectTimeout: 2000 });
      await connection.workflowService.getSystemInfo({});
      return connection;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`Temporal at ${address} not reachable: ${(error as Error).message}`, { cause: error });
      if (attempt % 10 === 0) logger.info({ address }, 'waiting for Temporal');
      await new Promise((r) => setTimeout(r, 300));
    }
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
