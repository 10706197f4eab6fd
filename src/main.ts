import { loadConfig } from './config.ts';
import { startServer, type Running } from './server.ts';
import { createLogger } from './telemetry/logger.ts';

/** The one-time token of the administrator created at the first start, for the person at the terminal. */
function announceFirstAdmin(username: string, token: string, passwordUrl: string): void {
  process.stderr.write(
    [
      '',
      '================================================================',
      ` Triad: first start. Created the administrator "${username}".`,
      ' Its access token (shown this once; keep it safe):',
      '',
      `   ${token}`,
      '',
      ' Use it as  Authorization: Bearer <token>  or as the password of',
      ' git/hg/fossil over HTTP. A new one: npm run triad -- admin token',
      ` create --username ${username}`,
      '',
      ' To sign in to the web interface, set a password at this one-time',
      ' link (valid 7 days; later: npm run triad -- admin user password',
      ` --username ${username}):`,
      '',
      `   ${passwordUrl}`,
      '================================================================',
      '',
      '',
    ].join('\n'),
  );
}

/**
 * Process entry for `triad serve`: config -> db -> app -> listen. SIGTERM and SIGINT (Ctrl-C)
 * drain and exit 0 within TRIAD_SHUTDOWN_TIMEOUT_SECONDS; past that deadline the process exits
 * anyway. A signal during the start is honoured once the start is done.
 */
export async function serve(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel, { format: config.logFormat });
  const state: { running?: Running } = {};
  let requested: string | undefined;
  let stopping = false;
  const stop = (r: Running, signal: string) => {
    stopping = true;
    log.info(
      { signal, timeout_seconds: config.shutdownTimeoutMs / 1000 },
      'shutting down: draining in-flight requests',
    );
    setTimeout(() => {
      log.warn('shutdown deadline reached: remaining work abandoned');
      log.info({ forced: true }, 'shutdown complete');
      process.exit(0);
    }, config.shutdownTimeoutMs).unref();
    r.close().then(
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
  const onSignal = (signal: string) => {
    if (stopping || requested !== undefined) {
      log.info({ signal }, 'already shutting down');
      return;
    }
    if (state.running === undefined) requested = signal;
    else stop(state.running, signal);
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  const running = await startServer(config, {
    log,
    command: 'serve',
    onFirstAdmin: (username, token, passwordUrl) => {
      // The token goes to the terminal once (stderr), never into the log that collectors keep.
      log.info({ username }, 'first start: created the administrator (its token is shown once)');
      announceFirstAdmin(username, token, passwordUrl);
    },
  });
  state.running = running;
  log.info({ url: running.url, port: running.port }, `Triad listening on ${running.url}`);
  if (requested !== undefined) stop(running, requested);
}
