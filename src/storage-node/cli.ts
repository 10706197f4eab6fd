/** The `triad storage ...`, `triad admin storage ...` and `triad admin repo move` commands. */
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { loadConfig } from '../config.ts';
import type { Orm } from '../db/database.ts';
import { inContext } from '../server.ts';
import type { Services } from '../services.ts';
import { openBlobStore } from '../storage/index.ts';
import { createLogger } from '../telemetry/logger.ts';
import { moveRepository } from './move.ts';
import { restoreNode } from './restore.ts';
import { runStorageNode } from './main.ts';
import { StorageNodes } from './service.ts';

type WithServices = <T>(fn: (s: { orm: Orm; services: Services }) => Promise<T>) => Promise<T>;

function args(command: string, argv: string[], options: ParseArgsOptionsConfig) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true });
  } catch (e) {
    throw new Error(`${command}: ${(e as Error).message}`, { cause: e });
  }
}

/** Answers the exit code (-1: a process that keeps running). */
export async function storageCommand(
  cmd: string,
  rest: string[],
  withServices: WithServices,
): Promise<number> {
  if (cmd === 'storage' && rest.length === 0) {
    await runStorageNode();
    return -1;
  }
  if (cmd === 'storage' && rest[0] === 'restore') {
    const a = args('storage restore', rest.slice(1), {
      repo: { type: 'string' },
      force: { type: 'boolean' },
    });
    const repo = a.values.repo === undefined ? undefined : Number(a.values.repo);
    if (repo !== undefined && !Number.isInteger(repo))
      throw new Error('storage restore: --repo takes a repository id');
    const config = loadConfig();
    if (config.blobs.s3 === undefined)
      throw new Error('storage restore: the backups are read from S3 (TRIAD_S3_*)');
    const blob = openBlobStore(config.blobs);
    const report = await withServices((s) =>
      inContext(s.orm, () =>
        restoreNode({
          repos: s.services.repos,
          blob,
          root: config.repoDir,
          node: config.storage.name,
          ...(repo === undefined ? {} : { repo }),
          force: a.values.force === true,
        }),
      ),
    );
    process.stdout.write(
      `restored ${report.restored.length} (${report.restored.join(', ') || 'none'}); ` +
        `already present ${report.present.length}; failed ${report.failed.length}\n`,
    );
    for (const f of report.failed) process.stderr.write(`repository ${f.id}: ${f.error}\n`);
    return report.failed.length === 0 ? 0 : 1;
  }
  if (cmd === 'admin' && rest[0] === 'storage' && rest[1] === 'list') {
    await withServices(async (s) => {
      const rows = await new StorageNodes({ em: () => s.orm.em }).list();
      for (const n of rows) {
        const health = StorageNodes.healthy(n) ? 'healthy' : 'silent';
        const free = (n.freeBytes / 2 ** 30).toFixed(1);
        process.stdout.write(
          `${n.name}\t${n.state}\t${health}\t${n.repositories} repositories\t${free} GiB free\t${n.address}\n`,
        );
      }
    });
    return 0;
  }
  if (cmd === 'admin' && rest[0] === 'storage' && (rest[1] === 'drain' || rest[1] === 'undrain')) {
    const a = args(`admin storage ${rest[1]}`, rest.slice(2), { node: { type: 'string' } });
    const node = a.values.node;
    if (typeof node !== 'string') throw new Error(`admin storage ${rest[1]}: --node is required`);
    await withServices((s) =>
      new StorageNodes({ em: () => s.orm.em }).setState(node, rest[1] === 'drain' ? 'draining' : 'up'),
    );
    process.stdout.write(`${node}: ${rest[1] === 'drain' ? 'draining (no new repositories)' : 'up'}\n`);
    return 0;
  }
  if (cmd === 'admin' && rest[0] === 'repo' && rest[1] === 'move') {
    const a = args('admin repo move', rest.slice(2), { to: { type: 'string' } });
    const [full] = a.positionals;
    const to = a.values.to;
    const m = /^([^/]+)\/([^/]+)$/.exec(full ?? '');
    if (m === null || typeof to !== 'string')
      throw new Error('admin repo move: usage: admin repo move ORG/REPO --to NODE');
    const config = loadConfig();
    if (config.storage.mode !== 'nodes')
      throw new Error('admin repo move: set TRIAD_STORAGE=nodes (and its secret)');
    const log = createLogger('warn', { format: config.logFormat });
    void log;
    const moved = await withServices((s) =>
      inContext(s.orm, async () => {
        const target = await s.services.repos.target(m[1]!, m[2]!);
        if (target === undefined) throw new Error(`admin repo move: no repository ${full ?? ''}`);
        const storage = s.services.storage!;
        return moveRepository(
          {
            repos: s.services.repos,
            changes: s.services.changes,
            nodes: storage.nodes,
            client: storage.client,
          },
          target.repo.id,
          to,
        );
      }),
    );
    process.stdout.write(`moved ${full ?? ''} from ${moved.from} to ${moved.to}\n`);
    return 0;
  }
  const words = [cmd, ...rest.slice(0, 2)].join(' ');
  process.stderr.write(`triad: unknown command "${words}" (see triad help)\n`);
  return 2;
}
