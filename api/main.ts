import { ConfigError, parseConfig, type Config } from './config';
import { createLogger } from './infra/logger';
import { builtWorkflowBundle, startTracing } from './infra/tracing';

/** Process entry point: `node dist/api/main.js [--roles=control,data,ingest,worker]`. */
async function main() {
  const rolesArg = process.argv.find((a) => a.startsWith('--roles='));
  let config: Config;
  try {
    config = parseConfig({ ...process.env, ...(rolesArg ? { ROLES: rolesArg.slice('--roles='.length) } : {}) });
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
  const logger = createLogger(config.LOG_LEVEL);
  // From the first moment: a stop asked for while starting waits until the start is done (a
  // migration or the Temporal dev server half started would be left behind), then stops.
  let stopAsked: string | undefined;
  let shutdown = (signal: string) => {
    stopAsked ??= signal;
    logger.info({ signal }, 'stopping once started');
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  // Before the server and everything it imports: instrumentations hook modules as they load.
  const tracing = await startTracing(config, logger);
  const { createPlatform, startRoles } = await import('./server.js');
  if (!config.WORKFLOW_BUNDLE_PATH) config.WORKFLOW_BUNDLE_PATH = builtWorkflowBundle(Boolean(tracing));

  logger.info({ roles: config.ROLES, embedded: config.embedded, dataDir: config.dataDir }, 'starting');
  const platform = await createPlatform(config, logger, tracing);
  const running = await startRoles(platform, config.ROLES);

  let stopping = false;
  shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const hardStop = setTimeout(() => {
      logger.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.SHUTDOWN_GRACE_MS + 10_000);
    hardStop.unref();
    try {
      await running.stop();
      // Last: the spans of the shutdown itself are exported too.
      await tracing?.shutdown();
      logger.info('stopped cleanly');
      logger.flush();
      process.exit(0);
    } catch (error) {
      logger.error({ err: error }, 'error during shutdown');
      process.exit(1);
    }
  };
  if (stopAsked) await shutdown(stopAsked);
}

main().catch((error) => {
  console.error('failed to start:', error instanceof Error ? error.stack : error);
  process.exit(1);
});
