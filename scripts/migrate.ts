import path from 'node:path';
import { openAnalytics } from '../analytics/client';
import { applyAnalyticsRetention, migrateAnalytics } from '../analytics/migrate';
import { parseConfig } from '../api/config';
import { createLogger } from '../api/infra/logger';
import { migrate } from '../api/infra/migrate';
import { openDatabase } from '../api/infra/postgres';

/** `npm run migrate`: applies the Postgres and analytics migrations and exits. */
async function main() {
  const config = parseConfig();
  const logger = createLogger(config.LOG_LEVEL);
  const db = await openDatabase({ url: config.DATABASE_URL, poolSize: 2, replyTimeoutMs: config.DATABASE_REPLY_TIMEOUT_MS, connectTimeoutMs: config.BACKEND_TIMEOUT_MS, dataDir: config.dataDir, applicationName: 'flags migrate', logger });
  try {
    logger.info({ applied: await migrate(db.sql) }, 'postgres migrations');
  } finally {
    await db.close();
  }
  const analytics = await openAnalytics({ url: config.CLICKHOUSE_URL, database: config.CLICKHOUSE_DATABASE, chdbPath: config.CHDB_PATH ?? path.join(config.dataDir, 'chdb'), cluster: config.CLICKHOUSE_CLUSTER });
  try {
    logger.info({ applied: await migrateAnalytics(analytics) }, 'analytics migrations');
    const retention = { raw: config.ANALYTICS_RETENTION_DAYS, rollup: config.ANALYTICS_ROLLUP_RETENTION_DAYS };
    logger.info({ changed: await applyAnalyticsRetention(analytics, retention), retention }, 'analytics retention');
  } finally {
    await analytics.close();
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
