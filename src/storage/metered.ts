import type { Readable } from 'node:stream';
import type client from 'prom-client';
import type { Metrics } from '../telemetry/metrics.ts';
import { BlobNotFound, type BlobInfo, type BlobStore, type ByteRange, type PutOptions } from './blob.ts';

type Op = 'put' | 'get' | 'stat' | 'delete' | 'delete_prefix' | 'list' | 'sweep' | 'presign' | 'init';

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * A blob store whose every operation is timed (`triad_blob_operation_duration_seconds`) and
 * whose failures are counted (`triad_blob_operation_errors_total`), by operation and backend
 * (`fs`, `s3`). A `get` is timed until the object's stream is handed out (the first byte for
 * S3); an error of that stream later counts as an error of `get`. A missing object is an
 * answer, not an error.
 */
export class MeteredBlobStore implements BlobStore {
  readonly kind: BlobStore['kind'];
  private readonly inner: BlobStore;
  private readonly duration: client.Histogram<'op' | 'backend'>;
  private readonly errors: client.Counter<'op' | 'backend'>;

  constructor(inner: BlobStore, metrics: Metrics) {
    this.inner = inner;
    this.kind = inner.kind;
    this.duration = metrics.histogram(
      'triad_blob_operation_duration_seconds',
      'Blob store (step logs, release assets) operations by operation and backend',
      ['op', 'backend'],
      BUCKETS,
    );
    this.errors = metrics.counter(
      'triad_blob_operation_errors_total',
      'Blob store operations that failed, by operation and backend',
      ['op', 'backend'],
    );
  }

  private async timed<T>(op: Op, run: () => Promise<T>): Promise<T> {
    const labels = { op, backend: this.kind };
    const end = this.duration.startTimer(labels);
    try {
      return await run();
    } catch (e) {
      if (!(e instanceof BlobNotFound)) this.errors.inc(labels);
      throw e;
    } finally {
      end();
    }
  }

  init(): Promise<void> {
    return this.timed('init', () => this.inner.init());
  }

  put(key: string, data: Buffer | Readable, opts?: PutOptions): Promise<{ size: number }> {
    return this.timed('put', () => this.inner.put(key, data, opts));
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const stream = await this.timed('get', () => this.inner.get(key, range));
    stream.on('error', () => this.errors.inc({ op: 'get', backend: this.kind }));
    return stream;
  }

  stat(key: string): Promise<BlobInfo | undefined> {
    return this.timed('stat', () => this.inner.stat(key));
  }

  delete(key: string): Promise<void> {
    return this.timed('delete', () => this.inner.delete(key));
  }

  deletePrefix(prefix: string): Promise<void> {
    return this.timed('delete_prefix', () => this.inner.deletePrefix(prefix));
  }

  /** Timed from the first page to the last; an error while paging counts. */
  async *list(prefix: string): AsyncIterable<BlobInfo> {
    const labels = { op: 'list', backend: this.kind };
    const end = this.duration.startTimer(labels);
    try {
      yield* this.inner.list(prefix);
    } catch (e) {
      this.errors.inc(labels);
      throw e;
    } finally {
      end();
    }
  }

  sweepIncomplete(prefix: string, olderThan: Date): Promise<number> {
    return this.timed('sweep', () => this.inner.sweepIncomplete(prefix, olderThan));
  }

  presignedGet(
    key: string,
    seconds: number,
    opts: { filename: string; contentType: string },
  ): Promise<string | undefined> {
    return this.timed('presign', () => this.inner.presignedGet(key, seconds, opts));
  }
}
