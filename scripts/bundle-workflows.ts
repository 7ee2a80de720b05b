import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { projectPath } from '../api/infra/paths';

/** Bundles the workflows once at build time so workers start without webpack. */
export async function bundleWorkflows(outFile: string): Promise<void> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: projectPath('workflows', 'index.ts'),
    logger: new DefaultLogger('WARN'),
  });
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, code);
}

if (require.main === module) {
  bundleWorkflows(projectPath('dist', 'workflow-bundle.js')).catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
