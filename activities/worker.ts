import { NativeConnection, Runtime, Worker, DefaultLogger, type WorkerOptions } from '@temporalio/worker';
import type { Logger } from '../api/infra/logger';
import { projectPath } from '../api/infra/paths';
import { createActivities, type ActivityDeps } from './index';

export interface WorkerHandle {
  stop(): Promise<void>;
}

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
  });
  const running = worker.run().catch((error) => opts.logger.error({ err: error }, 'Temporal worker stopped'));
  opts.logger.info({ taskQueue: opts.taskQueue }, 'Temporal worker running');
  return {
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  };
}
