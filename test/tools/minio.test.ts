/** The MinIO test helper: a real MinIO server on loopback, used through the npm `minio` client. */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startMinio, type MinioServer } from '../helpers/minio.ts';

let minio: MinioServer;
beforeAll(async () => {
  minio = await startMinio();
});
afterAll(() => minio?.stop());

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.from(c as Buffer));
  return Buffer.concat(chunks);
}

describe('MinIO on loopback', () => {
  test('when a bucket is made and an object put, then the object reads back with its size', async () => {
    const c = minio.client();
    await c.makeBucket('smoke', minio.region);
    expect(await c.bucketExists('smoke')).toBe(true);
    const body = Buffer.from('hello from triad\n'.repeat(1000));
    await c.putObject('smoke', 'dir/hello.txt', body, body.length, { 'Content-Type': 'text/plain' });
    const stat = await c.statObject('smoke', 'dir/hello.txt');
    expect(stat.size).toBe(body.length);
    expect((await readAll(await c.getObject('smoke', 'dir/hello.txt'))).equals(body)).toBe(true);
  });

  test('when the credentials are wrong, then the server refuses', async () => {
    const { Client } = await import('minio');
    const bad = new Client({
      endPoint: minio.host,
      port: minio.port,
      useSSL: false,
      accessKey: minio.accessKey,
      secretKey: 'not-the-secret',
      region: minio.region,
    });
    await expect(bad.listBuckets()).rejects.toThrow(/signature|SignatureDoesNotMatch/i);
  });

  test('when stopped, then the port no longer answers', async () => {
    const other = await startMinio();
    const url = other.url;
    expect((await fetch(`${url}/minio/health/live`)).ok).toBe(true);
    await other.stop();
    await expect(fetch(`${url}/minio/health/live`)).rejects.toThrow();
  });
});
