/**
 * Whole copies of a repository between nodes (a move, docs/storage.md): the source streams a tar
 * of it under its lock; the target downloads it into its scratch space, unpacks it beside its
 * repositories and renames it into place. A repository that leaves a node goes to `.trash/` at
 * once (new requests are told it is not here) and is deleted a minute later, so reads that
 * already started on it end normally.
 */
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { commandStream } from '../vcs/process/stream.ts';
import { runCommand } from '../vcs/process/run.ts';
import { PROTOCOL_VERSION, VERSION_HEADER } from '../vcs/remote/wire.ts';

const TRASH = '.trash';
const INCOMING = '.incoming';
/** How long a repository that left stays readable for requests already running on it. */
const TRASH_MS = 60_000;
const TAR_TIMEOUT_MS = 3600_000;
/**
 * Lock files a copy may carry from its source: reads go on there while it is copied, and an hg
 * streaming clone holds the store lock while it scans. They name the source's processes, never
 * the copy's; left in place they would make every push and streaming clone of the copy wait on
 * a lock nobody releases.
 */
const COPIED_LOCKS = ['.hg/wlock', '.hg/store/lock']; // of an hg repository (`<id>.hg`)

export async function exportRepository(
  root: string,
  repo: string,
  dir: string,
  res: ServerResponse,
  signal: AbortSignal,
): Promise<void> {
  void dir;
  res.writeHead(200, { 'content-type': 'application/x-tar' });
  await pipeline(commandStream('tar', ['-C', root, '-cf', '-', '--', repo], process.env, 0, { signal }), res);
}

export async function importRepository(o: {
  root: string;
  repo: string;
  from: string;
  secret: string;
  work: string;
}): Promise<void> {
  const file = path.join(o.work, 'copy.tar');
  const url = new URL(
    `/internal/v1/export?repo=${encodeURIComponent(o.repo)}&kind=${o.repo.split('.')[1] ?? ''}`,
    o.from,
  );
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    http
      .get(
        url,
        { headers: { authorization: `Bearer ${o.secret}`, [VERSION_HEADER]: PROTOCOL_VERSION } },
        resolve,
      )
      .on('error', reject);
  });
  if (res.statusCode !== 200) {
    res.resume();
    throw new Error(`the source node answered ${res.statusCode ?? 0} for the copy`);
  }
  await pipeline(res, createWriteStream(file, { mode: 0o600 }));
  if (!res.complete) throw new Error('the copy from the source node was cut short');
  const incoming = path.join(o.root, INCOMING);
  await fs.mkdir(incoming, { recursive: true });
  const unpack = await fs.mkdtemp(path.join(incoming, `${o.repo}-`));
  try {
    const r = await runCommand('tar', ['-C', unpack, '-xf', file], { timeoutMs: TAR_TIMEOUT_MS });
    if (r.code !== 0) throw new Error(`unpacking the copy failed: ${r.stderr}`);
    if (o.repo.endsWith('.hg'))
      for (const lock of COPIED_LOCKS) await fs.rm(path.join(unpack, o.repo, lock), { force: true });
    const dest = path.join(o.root, o.repo);
    // a copy left by an earlier move that did not finish is replaced
    await releaseRepository(o.root, o.repo);
    await fs.rename(path.join(unpack, o.repo), dest);
  } finally {
    await fs.rm(unpack, { recursive: true, force: true });
  }
}

/** Takes a repository out of the node now; deletes its files a minute later. */
export async function releaseRepository(root: string, repo: string): Promise<void> {
  const trash = path.join(root, TRASH);
  await fs.mkdir(trash, { recursive: true });
  const gone = path.join(trash, `${repo}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`);
  try {
    await fs.rename(path.join(root, repo), gone);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  setTimeout(() => void fs.rm(gone, { recursive: true, force: true }), TRASH_MS).unref();
}

/** At start: what a previous run left in its trash and scratch space goes. */
export async function sweepLeftovers(root: string): Promise<void> {
  await fs.rm(path.join(root, TRASH), { recursive: true, force: true });
  await fs.rm(path.join(root, INCOMING), { recursive: true, force: true });
}
