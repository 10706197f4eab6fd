import type { Readable } from 'node:stream';
import { Client, S3Error } from 'minio';
import {
  BlobNotFound,
  StorageUnavailable,
  attachment,
  safeKey,
  type BlobInfo,
  type BlobStore,
  type ByteRange,
  type PutOptions,
} from './blob.ts';

export type S3Settings = {
  /** Host name or address of the S3 endpoint. */
  host: string;
  port: number | undefined;
  useSSL: boolean;
  accessKey: string;
  secretKey: string;
  bucket: string;
  region: string;
  /** Bytes per multipart part (at least 5 MiB); objects up to this size go up in one request. */
  partSize?: number;
};

const DEFAULT_PART = 8 * 1024 * 1024;
const MIN_PART = 5 * 1024 * 1024;

/**
 * S3 driver on the `minio` client (MinIO, AWS S3 and other S3 servers). A put streams: the
 * source is cut into parts of `partSize` bytes, each uploaded while the next is read (at most two
 * parts in memory); a small object is one PUT. A put that fails aborts its multipart upload, so no
 * object and no stray parts remain.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3';
  readonly bucket: string;
  private readonly client: Client;
  private readonly region: string;
  private readonly partSize: number;
  private ready: Promise<void> | undefined;

  constructor(s: S3Settings) {
    this.bucket = s.bucket;
    this.region = s.region;
    this.partSize = Math.max(MIN_PART, s.partSize ?? DEFAULT_PART);
    this.client = new Client({
      endPoint: s.host,
      ...(s.port === undefined ? {} : { port: s.port }),
      useSSL: s.useSSL,
      accessKey: s.accessKey,
      secretKey: s.secretKey,
      region: s.region,
    });
  }

  /** Creates the bucket when missing; a failure is retried by the next call. */
  init(): Promise<void> {
    this.ready ??= (async () => {
      if (!(await this.client.bucketExists(this.bucket))) {
        await this.client.makeBucket(this.bucket, this.region).catch(async (e: unknown) => {
          // another replica made it in between
          if (!(await this.client.bucketExists(this.bucket))) throw e;
        });
      }
    })().catch((e: unknown) => {
      this.ready = undefined;
      throw unavailable('bucket check', e);
    });
    return this.ready;
  }

  async put(key: string, data: Buffer | Readable, opts: PutOptions = {}): Promise<{ size: number }> {
    safeKey(key);
    await this.init();
    const headers = { 'Content-Type': opts.contentType ?? 'application/octet-stream' };
    const source: AsyncIterable<Buffer> | Iterable<Buffer> = Buffer.isBuffer(data) ? [data] : data;
    let uploadId: string | undefined;
    const etags: { part: number; etag: string }[] = [];
    let inFlight: Promise<void> | undefined;
    let size = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    // Two part buffers, allocated once and reused: one uploading while the other fills, so a
    // large put holds 2 × partSize whatever its size and leaves no per-part garbage.
    const parts: Buffer[] = [];
    let current = 0;
    /** Moves exactly `partSize` bytes from `pending` into the next part buffer. */
    const takePart = (): Buffer => {
      const buf = (parts[current] ??= Buffer.allocUnsafe(this.partSize));
      current ^= 1;
      let filled = 0;
      while (filled < this.partSize) {
        const head = pending[0]!;
        const n = Math.min(head.length, this.partSize - filled);
        head.copy(buf, filled, 0, n);
        filled += n;
        if (n === head.length) pending.shift();
        else pending[0] = head.subarray(n);
      }
      pendingBytes -= this.partSize;
      return buf;
    };
    const sendPart = async (body: Buffer) => {
      if (inFlight !== undefined) await inFlight; // at most one part uploading while the next fills
      uploadId ??= await this.store('multipart start', () =>
        this.client.initiateNewMultipartUpload(this.bucket, key, headers),
      );
      const part = etags.length + 1;
      const id = uploadId;
      const slot = { part, etag: '' };
      etags.push(slot);
      inFlight = this.store('part upload', async () => {
        const r = await this.client.uploadPart(
          { bucketName: this.bucket, objectName: key, uploadID: id, partNumber: part, headers: {} },
          body,
        );
        slot.etag = r.etag;
      });
      // an error surfaces at the next await of inFlight; keep it from being unhandled meanwhile
      inFlight.catch(() => undefined);
    };
    try {
      let sourceError: unknown;
      try {
        for await (const chunk of source) {
          size += chunk.length;
          pending.push(chunk);
          pendingBytes += chunk.length;
          // The buffer filled next served the upload before the one in flight, which `sendPart`
          // waited for before starting that one: it is free.
          while (pendingBytes >= this.partSize) await sendPart(takePart());
        }
      } catch (e) {
        sourceError = e;
      }
      if (sourceError !== undefined) {
        if (sourceError instanceof StorageUnavailable) throw sourceError; // a store failure raised from sendPart
        throw new SourceFailed(sourceError);
      }
      const rest = Buffer.concat(pending);
      pending = [];
      if (uploadId === undefined) {
        await this.store('put', () => this.client.putObject(this.bucket, key, rest, rest.length, headers));
      } else {
        if (rest.length > 0) await sendPart(rest);
        await inFlight;
        const id = uploadId;
        await this.store('multipart completion', () =>
          this.client.completeMultipartUpload(this.bucket, key, id, etags),
        );
      }
      return { size };
    } catch (e) {
      if (inFlight !== undefined) await inFlight.catch(() => undefined);
      if (uploadId !== undefined) {
        const id = uploadId;
        await this.client.abortMultipartUpload(this.bucket, key, id).catch(() => undefined);
      }
      if (e instanceof SourceFailed) throw e.cause;
      throw e;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    safeKey(key);
    try {
      if (range === undefined) return await this.client.getObject(this.bucket, key);
      const length = range.end === undefined ? 0 : range.end - range.start + 1;
      return await this.client.getPartialObject(this.bucket, key, range.start, length);
    } catch (e) {
      if (isNotFound(e)) throw new BlobNotFound(key);
      throw unavailable('get', e);
    }
  }

  async stat(key: string): Promise<BlobInfo | undefined> {
    safeKey(key);
    try {
      const st = await this.client.statObject(this.bucket, key);
      return { key, size: st.size, modifiedAt: st.lastModified };
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw unavailable('stat', e);
    }
  }

  async delete(key: string): Promise<void> {
    safeKey(key);
    await this.store('delete', () => this.client.removeObject(this.bucket, key));
  }

  async deletePrefix(prefix: string): Promise<void> {
    let batch: string[] = [];
    const flush = async () => {
      const names = batch;
      batch = [];
      if (names.length > 0) await this.store('delete', () => this.client.removeObjects(this.bucket, names));
    };
    for await (const o of this.list(prefix)) {
      batch.push(o.key);
      if (batch.length >= 1000) await flush();
    }
    await flush();
  }

  async *list(prefix: string): AsyncIterable<BlobInfo> {
    await this.init();
    try {
      const stream = this.client.listObjectsV2(this.bucket, prefix, true) as AsyncIterable<{
        name?: string;
        size?: number;
        lastModified?: Date;
      }>;
      for await (const o of stream) {
        if (o.name === undefined) continue;
        yield { key: o.name, size: o.size ?? 0, modifiedAt: o.lastModified ?? new Date(0) };
      }
    } catch (e) {
      throw unavailable('list', e);
    }
  }

  async sweepIncomplete(prefix: string, olderThan: Date): Promise<number> {
    await this.init();
    const stale = new Set<string>();
    try {
      const uploads = this.client.listIncompleteUploads(this.bucket, prefix, true) as AsyncIterable<{
        key: string;
        initiated?: Date;
      }>;
      for await (const u of uploads) {
        if (u.initiated !== undefined && u.initiated < olderThan) stale.add(u.key);
      }
      for (const key of stale) await this.client.removeIncompleteUpload(this.bucket, key);
    } catch (e) {
      throw unavailable('incomplete upload sweep', e);
    }
    return stale.size;
  }

  async presignedGet(
    key: string,
    seconds: number,
    opts: { filename: string; contentType: string },
  ): Promise<string> {
    safeKey(key);
    await this.init();
    return this.store('presign', () =>
      this.client.presignedGetObject(this.bucket, key, seconds, {
        'response-content-type': opts.contentType,
        'response-content-disposition': attachment(opts.filename),
      }),
    );
  }

  private async store<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw unavailable(what, e);
    }
  }
}

/** The source stream of a put failed (its error goes back to the caller unchanged). */
class SourceFailed extends Error {
  constructor(cause: unknown) {
    super('source failed', { cause });
  }
}

function isNotFound(e: unknown): boolean {
  return e instanceof S3Error && (e.code === 'NoSuchKey' || e.code === 'NotFound');
}

function unavailable(what: string, e: unknown): StorageUnavailable {
  if (e instanceof StorageUnavailable) return e;
  const detail = e instanceof Error ? e.message : String(e);
  return new StorageUnavailable(`object store ${what} failed: ${detail}`, { cause: e });
}
