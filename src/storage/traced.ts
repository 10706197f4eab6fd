import { inSpan, SpanKind } from '../telemetry/spans.ts';
import type { BlobStore } from './blob.ts';

/**
 * `store` with a client span per call (`s3 put`, `s3 get`…, with the bucket's key), a child of
 * the span active at the call; nothing more than a flag test per call while tracing is off. A
 * `get` span ends when the object's stream is handed over (the first byte), a `put` span when the
 * object is stored; `list` is passed through.
 */
export function tracedBlobStore(store: BlobStore): BlobStore {
  const span = <T>(op: string, key: string, fn: () => Promise<T>) =>
    inSpan(
      `${store.kind} ${op}`,
      {
        kind: SpanKind.CLIENT,
        attributes: { 'blob.store': store.kind, 'blob.operation': op, 'blob.key': key },
      },
      fn,
    );
  return {
    kind: store.kind,
    init: () => span('init', '', () => store.init()),
    put: (key, data, opts) => span('put', key, () => store.put(key, data, opts)),
    get: (key, range) => span('get', key, () => store.get(key, range)),
    stat: (key) => span('stat', key, () => store.stat(key)),
    delete: (key) => span('delete', key, () => store.delete(key)),
    deletePrefix: (prefix) => span('delete prefix', prefix, () => store.deletePrefix(prefix)),
    list: (prefix) => store.list(prefix),
    sweepIncomplete: (prefix, olderThan) =>
      span('sweep', prefix, () => store.sweepIncomplete(prefix, olderThan)),
    presignedGet: (key, seconds, opts) => span('presign', key, () => store.presignedGet(key, seconds, opts)),
  };
}
