import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { migrate } from '../../api/infra/migrate';
import { bundleWorkflows } from '../../scripts/bundle-workflows';
import { chdbPathPid, workerChdbPath } from './chdb-path';

/** The migrated template of this jest run; a name per run so concurrent runs never collide. */
export const templateDatabase = () => process.env.TEST_TEMPLATE_DB ?? 'flags_template';

/**
 * Once per jest run: migrate a template database that every test file clones (cheap and
 * isolated), and bundle the workflows once so each test app's worker starts without webpack.
 * Workers inherit the environment set here; test/support/global-teardown.ts drops the template.
 */
export default async function globalSetup() {
  removeStaleChdbPaths();
  if (!process.env.DATABASE_URL || !process.env.REDIS_URL || !process.env.TEMPORAL_ADDRESS) {
    // Unit-only runs (pure logic) need none of this.
    return;
  }
  process.env.TEST_TEMPLATE_DB = `flags_template_${process.pid}`;
  const admin = postgres(process.env.DATABASE_URL, { max: 1, onnotice: () => undefined });
  await dropStaleTemplates(admin);
  await admin.unsafe(`CREATE DATABASE ${templateDatabase()}`);
  await admin.end();
  const template = postgres(withDatabase(process.env.DATABASE_URL, templateDatabase()), { max: 1, onnotice: () => undefined });
  await migrate(template);
  await template.end();

  const infraDir = process.env.TEST_INFRA_DIR ?? '/tmp/flags-test-infra';
  const bundle = path.join(infraDir, `workflow-bundle-${process.pid}.js`);
  fs.mkdirSync(infraDir, { recursive: true });
  await bundleWorkflows(bundle);
  process.env.WORKFLOW_BUNDLE_PATH = bundle;
}

/** Templates (and test databases) left by runs whose process is gone, e.g. killed ones. */
async function dropStaleTemplates(admin: postgres.Sql) {
  const rows = await admin<{ datname: string }[]>`SELECT datname FROM pg_database WHERE datname ~ '^(flags_template|t)_[0-9]+'`;
  for (const { datname } of rows) {
    const pid = Number(/^(?:flags_template|t)_(\d+)/.exec(datname)?.[1]);
    if (pid && !processAlive(pid)) await admin.unsafe(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
  }
}

/** The chDB path of each jest worker (test/support/harness.ts) whose process is gone. */
function removeStaleChdbPaths() {
  for (const entry of fs.readdirSync(path.dirname(workerChdbPath()))) {
    const pid = chdbPathPid(entry);
    if (pid !== undefined && !processAlive(pid)) fs.rmSync(workerChdbPath(pid), { recursive: true, force: true });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
