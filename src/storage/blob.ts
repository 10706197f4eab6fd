import type { Readable } from 'node:stream';

/**
 * Where large byte content (step logs, release assets) lives; PostgreSQL keeps only the keys.
 * Two drivers pass one contract (test/integration/blob-store.test.ts): the filesystem
 * (`fs.ts`, the zero-config default) and S3/MinIO (`s3.ts`, when `TRIAD_S3_ENDPOINT` is set).
 *
 * Keys are `/`-separated segments, none empty and none starting with `.`. Bytes stream in and
 * out: `put` never holds a whole object in memory (the S3 driver holds at most two parts).
 */
export interface BlobStore {
  readonly kind: 'fs' | 's3';
  /** Makes the store usable (the S3 bucket is created when missing). Idempotent. */
  init(): Promise<void>;
  /**
   * Stores `data` under `key`, replacing an object of that key only once all bytes arrived (a
   * failed put leaves no object). An error of `data` itself is rethrown as it is; a failure of
   * the store is a `StorageUnavailable`. Resolves with the bytes stored.
   */
  put(key: string, data: Buffer | Readable, opts?: PutOptions): Promise<{ size: number }>;
  /** Streams one object, or the bytes `range.start`..`range.end` (inclusive); `BlobNotFound` when missing. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** Size and modification time; undefined when the object does not exist. */
  stat(key: string): Promise<BlobInfo | undefined>;
  /** Deletes one object (nothing happens when it does not exist). */
  delete(key: string): Promise<void>;
  /** Deletes every object whose key starts with `prefix` (a whole segment path, e.g. `logs/12/`). */
  deletePrefix(prefix: string): Promise<void>;
  /** Every object whose key starts with `prefix`, in no particular order. */
  list(prefix: string): AsyncIterable<BlobInfo>;
  /**
   * Removes what puts that never finished left (a process killed mid-put, an S3 multipart
   * upload whose abort failed) when started before `olderThan`; answers how many.
   */
  sweepIncomplete(prefix: string, olderThan: Date): Promise<number>;
  /**
   * A URL that downloads the object without credentials for `seconds` (S3 only; undefined for
   * stores that cannot make one). `filename` and `contentType` become the response's headers.
   */
  presignedGet(
    key: string,
    seconds: number,
    opts: { filename: string; contentType: string },
  ): Promise<string | undefined>;
}

export type PutOptions = { contentType?: string };
export type ByteRange = { start: number; end?: number };
export type BlobInfo = { key: string; size: number; modifiedAt: Date };

/** `get` of a key that names no object. */
export class BlobNotFound extends Error {
  constructor(key: string) {
    super(`blob not found: ${key}`);
  }
}

/** The store cannot be reached or failed (HTTP 503 `storage_unavailable` where a request meets it). */
export class StorageUnavailable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * A repository's storage node cannot be reached (or does not hold it while it moves): HTTP 503
 * `storage_unavailable` for that repository alone.
 */
export class RepositoryUnavailable extends StorageUnavailable {}

export function safeKey(key: string): string {
  if (key === '' || key.split('/').some((s) => s === '' || s.startsWith('.'))) {
    throw new Error(`invalid blob key: ${key}`);
  }
  return key;
}

/** `Content-Disposition: attachment` with an ASCII fallback and the UTF-8 name (RFC 6266). */
export function attachment(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}
