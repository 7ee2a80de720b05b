import { NativeConnection, Runtime, Worker, DefaultLogger, type WorkerOptions } from '@temporalio/worker';
import type { Logger } from '../api/infra/logger';
import { projectPath } from '../api/infra/paths';
import { createActivities, type ActivityDeps } from './index';

export interface WorkerHandle {
  /** Task slots in use and available, for the management listener's metrics. */
  slots(): WorkerSlots;
  stop(): Promise<void>;
}

export interface WorkerSlots {
  running: boolean;
  workflow: { used: number; max: number };
  activity: { used: number; max: number };
}

/** Concurrent workflow tasks and activities per worker: Temporal's defaults, named so the slot metrics know them. */
const WORKFLOW_TASK_SLOTS = 100;
const ACTIVITY_TASK_SLOTS = 100;

let runtimeInstalled = false;

/**
 * Runs a Temporal worker for our task queue: in-process on the embedded profile, as its own
 * process (`npm run worker`) in production. A prebuilt bundle skips webpack at start.
 */
export async function startWorker(opts: {
  address: string;
  namespace: string;
  taskQueue: string;
  bundlePath?: string;
  deps: ActivityDeps;
  logger: Logger;
}): Promise<WorkerHandle> {
  if (!runtimeInstalled) {
    runtimeInstalled = true;
    try {
      Runtime.install({ logger: new DefaultLogger('WARN') });
    } catch {
      // Already installed by an earlier platform in this process (tests); the first one stays.
    }
  }
  const connection = await NativeConnection.connect({ address: opts.address });
  const source: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = opts.bundlePath
    ? { workflowBundle: { codePath: opts.bundlePath } }
    : { workflowsPath: projectPath('workflows', 'index.ts') };
  const worker = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    activities: createActivities(opts.deps),
    ...source,
    shutdownGraceTime: '5 seconds',
    maxConcurrentWorkflowTaskExecutions: WORKFLOW_TASK_SLOTS,
    maxConcurrentActivityTaskExecutions: ACTIVITY_TASK_SLOTS,
  });
  const running = worker.run().catch((error) => opts.logger.error({ err: error }, 'Temporal worker stopped'));
  opts.logger.info({ taskQueue: opts.taskQueue }, 'Temporal worker running');
  return {
    slots() {
      const status = worker.getStatus();
      return {
        running: status.runState === 'RUNNING',
        workflow: { used: status.numInFlightWorkflowActivations, max: WORKFLOW_TASK_SLOTS },
        activity: { used: status.numInFlightNonLocalActivities, max: ACTIVITY_TASK_SLOTS },
      };
    },
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  };
}
