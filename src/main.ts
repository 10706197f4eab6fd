import { loadConfig } from './config.ts';
import { startServer } from './server.ts';
import { createLogger } from './telemetry/logger.ts';

/** Process entry for `triad serve`: config -> db -> app -> listen; SIGTERM/SIGINT drain and exit 0. */
export async function serve(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const running = await startServer(config, { log });
  log.info({ url: running.url, port: running.port }, `Triad listening on ${running.url}`);
  const stop = (signal: string) => {
    log.info({ signal }, 'shutting down: draining in-flight requests');
    running.close().then(
      () => {
        log.info('shutdown complete');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
