import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  BlobNotFound,
  StorageUnavailable,
  safeKey,
  type BlobInfo,
  type BlobStore,
  type ByteRange,
} from './blob.ts';

/** Where puts in progress are written before their rename (a name no key can have). */
const INCOMING = '.incoming';

/**
 * Filesystem driver: one file per key under `root`. A put streams into a temporary file of the
 * same file system and renames it into place, so readers never see a half-written object.
 */
export class FsBlobStore implements BlobStore {
  readonly kind = 'fs';
  private readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  async init(): Promise<void> {
    await fs.mkdir(path.join(this.root, INCOMING), { recursive: true });
  }

  async put(key: string, data: Buffer | Readable): Promise<{ size: number }> {
    const file = this.file(key);
    const tmp = path.join(this.root, INCOMING, randomUUID());
    await storeOp(() => fs.mkdir(path.join(this.root, INCOMING), { recursive: true }));
    let size = 0;
    const source = Buffer.isBuffer(data) ? Readable.from([data]) : data;
    let sourceFailed: unknown;
    source.once('error', (e) => (sourceFailed ??= e));
    const counted = async function* (src: AsyncIterable<Buffer>) {
      for await (const chunk of src) {
        size += chunk.length;
        yield chunk;
      }
    };
    try {
      await pipeline(source, counted, createWriteStream(tmp));
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.rename(tmp, file);
    } catch (e) {
      await fs.rm(tmp, { force: true });
      if (sourceFailed !== undefined) throw sourceFailed as Error;
      throw new StorageUnavailable(`blob store write failed: ${(e as Error).message}`, { cause: e });
    }
    return { size };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const file = this.file(key);
    const handle = await fs.open(file, 'r').catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT' || e.code === 'EISDIR') throw new BlobNotFound(key);
      throw new StorageUnavailable(`blob store read failed: ${e.message}`, { cause: e });
    });
    return handle.createReadStream(
      range === undefined
        ? {}
        : { start: range.start, ...(range.end === undefined ? {} : { end: range.end }) },
    );
  }

  async stat(key: string): Promise<BlobInfo | undefined> {
    const st = await fs.stat(this.file(key)).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw new StorageUnavailable(`blob store stat failed: ${e.message}`, { cause: e });
    });
    return st?.isFile() === true ? { key, size: st.size, modifiedAt: st.mtime } : undefined;
  }

  async delete(key: string): Promise<void> {
    await storeOp(() => fs.rm(this.file(key), { force: true }));
  }

  async deletePrefix(prefix: string): Promise<void> {
    const target = path.join(this.root, safeKey(prefix.replace(/\/+$/, '')));
    await storeOp(() => fs.rm(target, { recursive: true, force: true }));
  }

  async *list(prefix: string): AsyncIterable<BlobInfo> {
    // Walk the deepest directory the prefix names whole, then filter by the full prefix.
    const dir = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
    const start = dir === '' ? this.root : path.join(this.root, safeKey(dir));
    const walk = async function* (abs: string, rel: string): AsyncGenerator<BlobInfo> {
      const entries = await fs.readdir(abs, { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        if (e.name.startsWith('.')) continue;
        const key = rel === '' ? e.name : `${rel}/${e.name}`;
        const full = path.join(abs, e.name);
        if (e.isDirectory()) {
          if (prefix.startsWith(`${key}/`) || key.startsWith(prefix)) yield* walk(full, key);
        } else if (e.isFile() && key.startsWith(prefix)) {
          const st = await fs.stat(full).catch(() => undefined);
          if (st !== undefined) yield { key, size: st.size, modifiedAt: st.mtime };
        }
      }
    };
    yield* walk(start, dir);
  }

  /** Temporary files of puts that never finished (the process died); `prefix` is not known for them. */
  async sweepIncomplete(_prefix: string, olderThan: Date): Promise<number> {
    const dir = path.join(this.root, INCOMING);
    let removed = 0;
    for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
      const st = await fs.stat(path.join(dir, name)).catch(() => undefined);
      if (st === undefined || st.mtime >= olderThan) continue;
      await fs.rm(path.join(dir, name), { force: true });
      removed += 1;
    }
    return removed;
  }

  presignedGet(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  private file(key: string): string {
    return path.join(this.root, safeKey(key));
  }
}

async function storeOp<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw new StorageUnavailable(`blob store failed: ${(e as Error).message}`, { cause: e });
  }
}
