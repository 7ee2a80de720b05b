import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { migrate } from '../../api/infra/migrate';
import { bundleWorkflows } from '../../scripts/bundle-workflows';

export const TEMPLATE_DB = 'flags_template';

/**
 * Once per jest run: migrate a template database that every test file clones (cheap and
 * isolated), and bundle the workflows once so each test app's worker starts without webpack.
 */
export default async function globalSetup() {
  if (!process.env.DATABASE_URL || !process.env.REDIS_URL || !process.env.TEMPORAL_ADDRESS) {
    // Unit-only runs (pure logic) need none of this.
    return;
  }
  const admin = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${TEMPLATE_DB}'`);
  await admin.unsafe(`DROP DATABASE IF EXISTS ${TEMPLATE_DB}`);
  await admin.unsafe(`CREATE DATABASE ${TEMPLATE_DB}`);
  await admin.end();
  const template = postgres(withDatabase(process.env.DATABASE_URL, TEMPLATE_DB), { max: 1, onnotice: () => undefined });
  await migrate(template);
  await template.end();

  const infraDir = process.env.TEST_INFRA_DIR ?? '/tmp/flags-test-infra';
  const bundle = path.join(infraDir, `workflow-bundle-${process.pid}.js`);
  fs.mkdirSync(infraDir, { recursive: true });
  await bundleWorkflows(bundle);
  process.env.WORKFLOW_BUNDLE_PATH = bundle;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
