/**
 * The blob store contract, run against both drivers: the filesystem and S3 on a real MinIO server
 * on loopback (test/helpers/minio.ts).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  BlobNotFound,
  FsBlobStore,
  S3BlobStore,
  StorageUnavailable,
  type BlobStore,
} from '../../src/storage/index.ts';
import { digest, pattern } from '../helpers/bytes.ts';
import { startMinio, type MinioServer } from '../helpers/minio.ts';

const MiB = 1024 * 1024;

async function text(s: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of s as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

/** A source that yields some bytes and then fails. */
function failing(after: number): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(Buffer.alloc(after, 1));
      } else this.destroy(new Error('source broke'));
    },
  });
}

async function keys(store: BlobStore, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.list(prefix)) out.push(o.key);
  return out.sort();
}

let minio: MinioServer;
let fsRoot: string;
const stores: Record<string, () => BlobStore> = {};

beforeAll(async () => {
  minio = await startMinio();
  fsRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-blobs-'));
  stores.fs = () => new FsBlobStore(fsRoot);
  stores.s3 = () =>
    new S3BlobStore({
      host: minio.host,
      port: minio.port,
      useSSL: false,
      accessKey: minio.accessKey,
      secretKey: minio.secretKey,
      bucket: 'contract',
      region: minio.region,
      partSize: 5 * MiB,
    });
}, 60_000);
afterAll(async () => {
  await minio?.stop();
  await fs.rm(fsRoot, { recursive: true, force: true });
});

describe.each(['fs', 's3'])('blob store contract: %s', (kind) => {
  let store: BlobStore;
  beforeAll(async () => {
    store = stores[kind]!();
    await store.init();
  });

  test('when a buffer is put, then it reads back whole, by range, and stat gives its size', async () => {
    const r = await store.put('c/small/a.txt', Buffer.from('hello, blob store'));
    expect(r.size).toBe(17);
    expect(await text(await store.get('c/small/a.txt'))).toBe('hello, blob store');
    expect(await text(await store.get('c/small/a.txt', { start: 7, end: 10 }))).toBe('blob');
    expect(await text(await store.get('c/small/a.txt', { start: 12 }))).toBe('store');
    const st = await store.stat('c/small/a.txt');
    expect(st?.size).toBe(17);
    expect(st?.modifiedAt.getTime()).toBeGreaterThan(Date.now() - 10 * 60_000);
  });

  test('when a stream larger than several parts is put, then the same bytes come back', async () => {
    const size = 12 * MiB + 12345;
    const want = await digest(pattern(size));
    const r = await store.put('c/big/obj', pattern(size), { contentType: 'application/x-test' });
    expect(r.size).toBe(size);
    expect(await digest(await store.get('c/big/obj'))).toEqual(want);
    const tail = await digest(await store.get('c/big/obj', { start: size - 100 }));
    expect(tail.size).toBe(100);
  });

  test('when an empty stream is put, then an empty object exists', async () => {
    await store.put('c/empty', Readable.from([]));
    expect((await store.stat('c/empty'))?.size).toBe(0);
    expect(await text(await store.get('c/empty'))).toBe('');
  });

  test('when the source fails mid-put, then its error comes back and no object remains', async () => {
    for (const after of [1000, 7 * MiB]) {
      const key = `c/broken/${after}`;
      await expect(store.put(key, failing(after))).rejects.toThrow('source broke');
      expect(await store.stat(key)).toBeUndefined();
    }
    expect(await keys(store, 'c/broken/')).toEqual([]);
    if (kind === 's3') {
      // no multipart upload left behind either
      const pending: unknown[] = [];
      for await (const u of minio.client().listIncompleteUploads('contract', 'c/', true)) pending.push(u);
      expect(pending).toEqual([]);
    }
  });

  test('when a key is put twice, then the second content wins', async () => {
    await store.put('c/twice', Buffer.from('one'));
    await store.put('c/twice', Buffer.from('second'));
    expect(await text(await store.get('c/twice'))).toBe('second');
  });

  test('when a key names nothing, then get rejects with BlobNotFound and stat is undefined', async () => {
    await expect(store.get('c/none/here')).rejects.toBeInstanceOf(BlobNotFound);
    expect(await store.stat('c/none/here')).toBeUndefined();
    await store.delete('c/none/here'); // deleting nothing is fine
  });

  test('when objects are listed, deleted and deleted by prefix, then exactly those go', async () => {
    for (const k of ['l/1/a', 'l/1/b', 'l/10/c', 'l/2/d']) await store.put(k, Buffer.from(k));
    expect(await keys(store, 'l/1/')).toEqual(['l/1/a', 'l/1/b']);
    expect(await keys(store, 'l/')).toEqual(['l/1/a', 'l/1/b', 'l/10/c', 'l/2/d']);
    await store.delete('l/1/a');
    expect(await keys(store, 'l/1/')).toEqual(['l/1/b']);
    await store.deletePrefix('l/1/');
    expect(await keys(store, 'l/')).toEqual(['l/10/c', 'l/2/d']);
  });

  test('when a key is malformed, then the store refuses it', async () => {
    await expect(store.put('../x', Buffer.from('x'))).rejects.toThrow(/invalid blob key/);
    await expect(store.put('a//b', Buffer.from('x'))).rejects.toThrow(/invalid blob key/);
  });

  test('when a presigned URL is asked for, then S3 gives one that downloads the object and files give none', async () => {
    await store.put('c/signed.bin', Buffer.from('signed bytes'));
    const url = await store.presignedGet('c/signed.bin', 300, {
      filename: 'x y.bin',
      contentType: 'text/plain',
    });
    if (kind === 'fs') {
      expect(url).toBeUndefined();
      return;
    }
    const r = await fetch(url!);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain');
    expect(r.headers.get('content-disposition')).toContain('x y.bin');
    expect(await r.text()).toBe('signed bytes');
  });
});

describe('S3 driver', () => {
  test('when the bucket is missing, then init creates it', async () => {
    const s = new S3BlobStore({
      host: minio.host,
      port: minio.port,
      useSSL: false,
      accessKey: minio.accessKey,
      secretKey: minio.secretKey,
      bucket: 'made-by-init',
      region: minio.region,
    });
    expect(await minio.client().bucketExists('made-by-init')).toBe(false);
    await s.init();
    expect(await minio.client().bucketExists('made-by-init')).toBe(true);
  });

  test('when the server cannot be reached, then every call fails with StorageUnavailable', async () => {
    const s = new S3BlobStore({
      host: '127.0.0.1',
      port: 9, // discard: nothing listens
      useSSL: false,
      accessKey: 'x',
      secretKey: 'y',
      bucket: 'nowhere',
      region: 'us-east-1',
    });
    await expect(s.init()).rejects.toBeInstanceOf(StorageUnavailable);
    await expect(s.put('a', Buffer.from('x'))).rejects.toBeInstanceOf(StorageUnavailable);
    await expect(s.get('a')).rejects.toBeInstanceOf(StorageUnavailable);
    await expect(s.stat('a')).rejects.toBeInstanceOf(StorageUnavailable);
  });
});

describe('filesystem driver', () => {
  test('when puts fail on their first chunk, then no temporary file is left behind', async () => {
    // The temporary file is opened while the source already fails: its removal must wait for
    // the open, or the file appears after it (a few times in hundreds).
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-blobs-tmp-'));
    try {
      const s = new FsBlobStore(root);
      await s.init();
      await Promise.all(
        Array.from({ length: 8 }, async (_, lane) => {
          for (let i = 0; i < 40; i++) {
            await expect(s.put(`t/${lane}/${i}`, failing(1000))).rejects.toThrow('source broke');
          }
        }),
      );
      expect(await fs.readdir(path.join(root, '.incoming'))).toEqual([]);
      expect(await keys(s, 't/')).toEqual([]);
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});
