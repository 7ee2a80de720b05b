import { NativeConnection, Runtime, Worker, DefaultLogger, type WorkerOptions } from '@temporalio/worker';
import type { Logger } from '../api/infra/logger';
import { WORKFLOW_TRACING_MODULE, type Tracing } from '../api/infra/tracing';
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
  /** When set, workflows and activities continue the trace of whoever started them. */
  tracing?: Tracing;
  logger: Logger;
}): Promise<WorkerHandle> {
  if (!runtimeInstalled) {
    runtimeInstalled = true;
    try {
      // No signal handlers of its own: api/main.ts stops the worker with everything else.
      Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: [] });
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
    ...(opts.tracing ? await tracedWorkerOptions(opts.tracing, Boolean(opts.bundlePath)) : {}),
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

/**
 * Activity interceptors (a span per execution, child of the workflow's), the workflow
 * interceptors (in the sandbox; a prebuilt bundle has them compiled in, see
 * scripts/bundle-workflows.ts) and the sink their spans leave the sandbox through.
 * Loaded only when tracing is on.
 */
async function tracedWorkerOptions(tracing: Tracing, bundled: boolean): Promise<Pick<WorkerOptions, 'interceptors' | 'sinks'>> {
  const otel = await import('@temporalio/interceptors-opentelemetry/lib/worker/index.js');
  // Typed against the 1.x SDK the interceptors depend on; tracing.workflowSpanProcessor takes their spans.
  type SinkArgs = Parameters<typeof otel.makeWorkflowExporter>;
  return {
    interceptors: {
      activity: [(ctx) => ({ inbound: new otel.OpenTelemetryActivityInboundInterceptor(ctx), outbound: new otel.OpenTelemetryActivityOutboundInterceptor(ctx) })],
      workflowModules: bundled ? [] : [WORKFLOW_TRACING_MODULE],
    },
    sinks: { exporter: otel.makeWorkflowExporter(tracing.workflowSpanProcessor as unknown as SinkArgs[0], tracing.resource as unknown as SinkArgs[1]) },
  };
}
