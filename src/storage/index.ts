import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';

/** Where large byte content (step logs, release assets) lives; PostgreSQL keeps only the keys. */
export interface BlobStore {
  put(key: string, data: Buffer): Promise<void>;
  /** Streams one object; rejects when it does not exist. */
  get(key: string): Promise<Readable>;
  /** Deletes every object whose key starts with `prefix`. */
  deletePrefix(prefix: string): Promise<void>;
}

function safeKey(key: string): string {
  if (key === '' || key.split('/').some((s) => s === '' || s === '.' || s === '..')) {
    throw new Error(`invalid blob key: ${key}`);
  }
  return key;
}

/** Filesystem driver: one file per key under `root`. Writes are atomic (temp file + rename). */
export class FsBlobStore implements BlobStore {
  private readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  async put(key: string, data: Buffer): Promise<void> {
    const file = path.join(this.root, safeKey(key));
    await fs.mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
    await fs.writeFile(tmp, data);
    await fs.rename(tmp, file);
  }

  async get(key: string): Promise<Readable> {
    const file = path.join(this.root, safeKey(key));
    await fs.access(file);
    return createReadStream(file);
  }

  async deletePrefix(prefix: string): Promise<void> {
    const target = path.join(this.root, safeKey(prefix.replace(/\/+$/, '')));
    await fs.rm(target, { recursive: true, force: true });
  }
}
