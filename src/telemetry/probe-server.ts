import http from 'node:http';
import type { Registry } from 'prom-client';

/**
 * The small HTTP server of a process's probes and metrics (the agent's, the operator's): `/metrics`
 * from its registry, and each probe path answering 200 `{status: "ok"}` when its check finds no
 * problem, else 503 `{status: "failing", problems}`.
 */
export class ProbeServer {
  private readonly registry: Registry;
  private server: http.Server | undefined;

  constructor(registry: Registry) {
    this.registry = registry;
  }

  /** The port it listens on (undefined: not listening). */
  get port(): number | undefined {
    const a = this.server?.address();
    return a !== null && typeof a === 'object' ? a.port : undefined;
  }

  /**
   * Listens on `port` (0: any free one) of `host` (default: every address); `probes` maps a path to
   * the problems it finds now.
   */
  async listen(port: number, probes: Record<string, () => string[]>, host?: string): Promise<void> {
    const server = http.createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0] ?? '';
      const probe = probes[path];
      if (probe !== undefined) {
        const problems = probe();
        res
          .writeHead(problems.length === 0 ? 200 : 503, { 'content-type': 'application/json' })
          .end(JSON.stringify(problems.length === 0 ? { status: 'ok' } : { status: 'failing', problems }));
      } else if (path === '/metrics') {
        this.registry.metrics().then(
          (text) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
          () => res.writeHead(500).end(),
        );
      } else res.writeHead(404).end();
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  }

  close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return Promise.resolve();
    return new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
