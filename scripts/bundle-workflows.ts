import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { projectPath } from '../api/infra/paths';
import { WORKFLOW_TRACING_MODULE, workflowBundlePath } from '../api/infra/tracing';

/**
 * Bundles the workflows once at build time so workers start without webpack. `traced` adds the
 * OpenTelemetry workflow interceptors: the bundle a worker with tracing on loads instead.
 */
export async function bundleWorkflows(outFile: string, opts: { traced?: boolean } = {}): Promise<void> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: projectPath('workflows', 'index.ts'),
    workflowInterceptorModules: opts.traced ? [WORKFLOW_TRACING_MODULE] : [],
    logger: new DefaultLogger('WARN'),
  });
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, code);
}

if (require.main === module) {
  (async () => {
    for (const traced of [false, true]) await bundleWorkflows(workflowBundlePath(traced), { traced });
  })().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
