/**
 * Repository backups to the blob store and their restore (src/storage-node/backup.ts), on a real
 * MinIO server and the real git, hg and fossil: for each kind a first backup, incremental ones
 * after each change (forced pushes, deletions, tags, bookmarks, phases), then the repository is
 * deleted and restored elsewhere and compared exactly. Also: no backup, a backup that stopped
 * before its manifest, and one quick round trip on the filesystem store.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  BackupNotFound,
  backedUpRepositories,
  backupRepository,
  restoreRepository,
} from '../../src/storage-node/backup.ts';
import { dataKey, readManifest } from '../../src/storage-node/backup/manifest.ts';
import { FsBlobStore, S3BlobStore, type BlobStore } from '../../src/storage/index.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { closeSpawner } from '../../src/vcs/process/spawner.ts';
import {
  fossilServer,
  gitServer,
  hgPush,
  hgServer,
  sha256,
  state,
  type ServerRepo,
} from '../helpers/backup-clients.ts';
import { startMinio, type MinioServer } from '../helpers/minio.ts';
import { ok, tempDir } from '../helpers/vcs.ts';

let minio: MinioServer;
let s3: BlobStore;
let root: string;
/**
 * The backup after a 5-commit push, per kind (printed at the end): bytes put (data object and
 * manifest), of which the data object, and milliseconds.
 */
const figures: Record<string, { bytes: number; object: number; ms: number }> = {};

beforeAll(async () => {
  minio = await startMinio();
  s3 = new S3BlobStore({
    host: minio.host,
    port: minio.port,
    useSSL: false,
    accessKey: minio.accessKey,
    secretKey: minio.secretKey,
    bucket: 'triad-backups',
    region: minio.region,
  });
  await s3.init();
  root = await tempDir('triad-backup-');
}, 60_000);

afterAll(async () => {
  if (Object.keys(figures).length > 0)
    console.log(`incremental backup of a 5-commit push: ${JSON.stringify(figures)}`);
  await minio?.stop();
  await closeSpawner();
});

/** A repository of `kind` and the helpers its test uses, in a directory of its own. */
async function setup(kind: VcsKind, repoId: number, blob: BlobStore = s3) {
  const dir = path.join(root, `${kind}-${repoId}`);
  await fs.mkdir(dir);
  const make = { git: gitServer, hg: hgServer, fossil: fossilServer }[kind];
  const repo: ServerRepo = await make(dir);
  const tmpDir = path.join(dir, 'tmp');
  const backup = async () => {
    const r = await backupRepository({ blob, repoId, kind, dir: repo.srv, tmpDir });
    // its temporary files are gone
    expect(await fs.readdir(tmpDir)).toEqual([]);
    return r;
  };
  const restore = async (dest: string) => restoreRepository({ blob, repoId, kind, dest, tmpDir });
  const manifest = async () => (await readManifest(blob, repoId, kind))!;
  /** The bytes of the newest data object. */
  const lastObject = async () => {
    const m = await manifest();
    const chunks: Buffer[] = [];
    for await (const c of (await blob.get(m.objects.at(-1)!)) as AsyncIterable<Buffer>) chunks.push(c);
    return Buffer.concat(chunks);
  };
  const size = async (key: string) => (await blob.stat(key))!.size;
  return { dir, repo, backup, restore, manifest, lastObject, size };
}

/** Five small commits, as one push brings them. */
async function fiveCommits(repo: ServerRepo, tag: string): Promise<void> {
  for (let i = 1; i <= 5; i++) await repo.commit({ [`${tag}.txt`]: `${tag} ${i}\n` }, `${tag} ${i}`);
}

describe('git', () => {
  const id = 101;
  let t: Awaited<ReturnType<typeof setup>>;
  const git = (...args: string[]) => ok('git', args, t.repo.work);
  const push = (...args: string[]) => git('push', '-q', 'origin', ...args);

  test('first and incremental backups hold only what is new', async () => {
    t = await setup('git', id);
    await t.repo.commit({ 'big.bin': randomBytes(300_000), 'README.md': '# one\n' }, 'one');
    await t.repo.commit({ 'README.md': '# two\n' }, 'two');
    await push('main');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    const first = await t.size((await t.manifest()).objects[0]!);
    expect(first).toBeGreaterThan(300_000);

    const before = (await git('rev-parse', 'HEAD')).trim();
    await t.repo.commit({ 'README.md': '# three\n' }, 'three');
    await push('main');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    const m = await t.manifest();
    expect(m.objects).toHaveLength(2);
    expect(await t.size(m.objects[1]!)).toBeLessThan(first / 50);
    // The bundle's header: it needs the previous head (a prerequisite line `-<id>`), so it does not carry it.
    const header = (await t.lastObject()).toString('latin1').split('\n\n')[0]!;
    expect(header.split('\n').filter((l) => l.startsWith('-'))).toEqual([`-${before} two`]);

    // Nothing new: no object, and the manifest is the same but for its time.
    expect(await t.backup()).toMatchObject({ objects: 0 });

    await fiveCommits(t.repo, 'five');
    await push('main');
    const five = await t.backup();
    expect(five.objects).toBe(1);
    figures.git = { bytes: five.bytes, object: (await t.lastObject()).length, ms: five.ms };
  });

  test('tags, branches, a forced push and deletions', async () => {
    await git('tag', '-a', '-m', 'release one', 'v1');
    await git('tag', 'light', 'HEAD~1');
    await push('--tags');
    // an annotated tag is a new object: a bundle of it alone
    expect(await t.backup()).toMatchObject({ objects: 1 });
    expect((await t.manifest()).refs).toMatchObject({ refs: { 'refs/tags/light': expect.any(String) } });

    await git('checkout', '-q', '-b', 'feature');
    await t.repo.commit({ 'f.txt': 'feature\n' }, 'feature');
    await push('feature');
    // a branch on a commit the store has: no object
    await push('HEAD~2:refs/heads/old');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    await push('HEAD~1:refs/heads/old2');
    expect(await t.backup()).toMatchObject({ objects: 0 });

    // force push: main reset to an older commit plus a new divergent one
    await git('checkout', '-q', 'main');
    await git('reset', '-q', '--hard', 'HEAD~3');
    await t.repo.commit({ 'README.md': '# diverged\n' }, 'diverged');
    await push('-f', 'main');
    expect(await t.backup()).toMatchObject({ objects: 1 });

    await push('--delete', 'feature', 'old2');
    await push(':refs/tags/light');
    expect(await t.backup()).toMatchObject({ objects: 0 });
    // HEAD naming another branch than the default
    await ok('git', ['-C', t.repo.srv, 'symbolic-ref', 'HEAD', 'refs/heads/old'], t.dir);
    expect(await t.backup()).toMatchObject({ objects: 0 });
  });

  test('a backup that stopped before its manifest leaves the previous state; restore is exact', async () => {
    const m = await t.manifest();
    // what a backup killed after its data object and before the manifest leaves
    await s3.put(dataKey(id, m.seq + 1, 'bundle'), Buffer.from('not a bundle'));
    const expected = await state('git', t.repo.srv);
    await t.restore(path.join(t.dir, 'restored-1.git'));
    expect(await state('git', path.join(t.dir, 'restored-1.git'))).toBe(expected);

    // the next backup takes the stray object's key
    await git('checkout', '-q', 'main');
    await t.repo.commit({ 'after.txt': 'after\n' }, 'after the stray');
    await push('main');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    expect((await t.manifest()).objects.at(-1)).toBe(dataKey(id, m.seq + 1, 'bundle'));

    const final = await state('git', t.repo.srv);
    expect(final).toContain(' tag '); // the annotated tag survives as a tag object
    await fs.rm(t.repo.srv, { recursive: true });
    const dest = path.join(t.dir, 'elsewhere', 'restored.git');
    await t.restore(dest);
    expect(await state('git', dest)).toBe(final);
    await ok('git', ['-C', dest, 'fsck', '--no-dangling'], t.dir);
    expect((await ok('git', ['-C', dest, 'cat-file', '-t', 'v1'], t.dir)).trim()).toBe('tag');
    // never over an existing repository
    await expect(t.restore(dest)).rejects.toThrow(/already exists/);
  });
});

describe('hg', () => {
  const id = 102;
  let t: Awaited<ReturnType<typeof setup>>;
  const hg = (...args: string[]) => ok('hg', args, t.repo.work);
  const srv = (...args: string[]) => ok('hg', ['-R', t.repo.srv, ...args], t.dir);
  const node = async (rev: string) => (await hg('log', '-r', rev, '-T', '{node}')).trim();

  test('first and incremental backups hold only what is new', async () => {
    t = await setup('hg', id);
    await t.repo.commit({ 'big.bin': randomBytes(300_000), 'README.md': '# one\n' }, 'one');
    await hg('bookmark', '@');
    await t.repo.commit({ 'README.md': '# two\n' }, 'two');
    await hgPush(t.repo.work, '-B', '@');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    const first = await t.size((await t.manifest()).objects[0]!);
    expect(first).toBeGreaterThan(300_000);

    const three = await t.repo.commit({ 'README.md': '# three\n' }, 'three');
    await hgPush(t.repo.work, '-B', '@');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    const m = await t.manifest();
    expect(await t.size(m.objects[1]!)).toBeLessThan(first / 50);
    // the bundle holds the one new changeset
    const file = path.join(t.dir, 'second.hg');
    await fs.writeFile(file, await t.lastObject());
    const listed = await ok('hg', ['debugbundle', file], t.dir);
    expect(listed.match(/^\s+[0-9a-f]{40}$/gm)?.map((l) => l.trim())).toEqual([three]);

    expect(await t.backup()).toMatchObject({ objects: 0 });

    await fiveCommits(t.repo, 'five');
    await hgPush(t.repo.work, '-B', '@');
    const five = await t.backup();
    expect(five.objects).toBe(1);
    figures.hg = { bytes: five.bytes, object: (await t.lastObject()).length, ms: five.ms };
  });

  test('drafts, a phase change, a secret changeset, bookmarks, tags and a named branch', async () => {
    // pushed into a non-publishing repository: they stay draft there
    const d1 = await t.repo.commit({ 'd.txt': 'd1\n' }, 'draft one');
    const d2 = await t.repo.commit({ 'd.txt': 'd2\n' }, 'draft two');
    await hgPush(t.repo.work, '--config', 'phases.publish=false', '-B', '@');
    expect((await srv('log', '-r', d1, '-T', '{phase}')).trim()).toBe('draft');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    expect((await t.manifest()).refs).toMatchObject({ phases: { draftRoots: [d1], secretRoots: [] } });

    await srv('phase', '--public', '-r', d1);
    await srv('phase', '--secret', '--force', '-r', d2);
    expect(await t.backup()).toMatchObject({ objects: 0 });
    expect((await t.manifest()).refs).toMatchObject({ phases: { draftRoots: [d2], secretRoots: [d2] } });

    await srv('bookmark', '-r', d1, 'feature');
    expect(await t.backup()).toMatchObject({ objects: 0 });
    await srv('bookmark', '-f', '-r', await node('@~2'), 'feature');
    await srv('bookmark', '-r', d1, 'gone');
    expect(await t.backup()).toMatchObject({ objects: 0 });
    await srv('bookmark', '-d', 'gone');
    // a local tag: no changeset carries it, the manifest does
    await srv('tag', '--local', '-r', d1, 'nightly');
    expect(await t.backup()).toMatchObject({ objects: 0 });
    expect((await t.manifest()).refs).toMatchObject({ tags: { nightly: d1 } });

    // a named branch from d1, whose head then carries the tag changesets (one tag removed)
    await hg('update', '-q', '-r', d1);
    await hg('branch', '-q', 'stable');
    await t.repo.commit({ 's.txt': 'stable\n' }, 'on stable');
    await hg('tag', '-r', d1, 'v1.0');
    await hg('tag', '-r', d1, 'v0.9');
    await hg('tag', '--remove', 'v0.9');
    await hgPush(t.repo.work, '--new-branch', '-r', '.');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    expect((await t.manifest()).refs).toMatchObject({ tags: { 'v1.0': d1 } });
  });

  test('a backup that stopped before its manifest leaves the previous state; restore is exact', async () => {
    const m = await t.manifest();
    await s3.put(dataKey(id, m.seq + 1, 'hg'), Buffer.from('not a bundle'));
    const expected = await state('hg', t.repo.srv);
    expect(expected).toContain(' secret ');
    await fs.rm(t.repo.srv, { recursive: true });
    const dest = path.join(t.dir, 'restored.hg');
    await t.restore(dest);
    expect(await state('hg', dest)).toBe(expected);
    await ok('hg', ['-R', dest, 'verify', '-q'], t.dir);
  });
});

describe('fossil', () => {
  const id = 103;
  let t: Awaited<ReturnType<typeof setup>>;
  const fossil = (...args: string[]) => ok('fossil', args, t.repo.work);

  test('the repository file, uploaded when it changed', async () => {
    t = await setup('fossil', id);
    await t.repo.commit({ 'README.md': '# one\n' }, 'one');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    const m = await t.manifest();
    expect(m.refs).toMatchObject({ size: (await fs.stat(t.repo.srv)).size });
    expect(m.refs).toMatchObject({ sha256: await sha256(t.repo.srv) });
    // unchanged: nothing uploaded
    expect(await t.backup()).toMatchObject({ objects: 0 });

    await fiveCommits(t.repo, 'five');
    const five = await t.backup();
    expect(five.objects).toBe(1);
    figures.fossil = { bytes: five.bytes, object: (await t.lastObject()).length, ms: five.ms };
    // one file replaces the earlier: a restore reads the last only
    expect((await t.manifest()).objects).toEqual([dataKey(id, 2, 'fossil')]);
  });

  test('branches, tags and their deletion; restore is exact', async () => {
    const trunk = await t.repo.commit({ 'a.txt': 'a\n' }, 'on trunk');
    await fossil('tag', 'add', 'v1', trunk);
    await fossil('tag', 'add', 'v0', trunk);
    await fossil('commit', '--no-warnings', '--branch', 'feature', '--allow-empty', '-m', 'feature');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    expect((await t.manifest()).refs).toMatchObject({ tags: { v1: trunk, v0: trunk } });
    await fossil('tag', 'cancel', 'v0', trunk);
    await fossil('branch', 'close', 'feature');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    expect((await t.manifest()).refs).not.toMatchObject({ tags: { v0: expect.any(String) } });

    const m = await t.manifest();
    await s3.put(dataKey(id, m.seq + 1, 'fossil'), Buffer.from('not a repository'));
    const expected = await state('fossil', t.repo.srv);
    const bytes = await sha256(t.repo.srv);
    await fs.rm(t.repo.srv);
    const dest = path.join(t.dir, 'restored.fossil');
    await t.restore(dest);
    expect(await sha256(dest)).toBe(bytes);
    expect(await state('fossil', dest)).toBe(expected);
  });
});

describe('fossil beside a journal', () => {
  test('the copy is one SQLite writes itself, and restores the same repository', async () => {
    const t = await setup('fossil', 104);
    await t.repo.commit({ 'a.txt': 'a\n' }, 'a');
    // what a writer that died may leave (empty here: SQLite sees no transaction to roll back)
    await fs.writeFile(`${t.repo.srv}-journal`, '');
    expect(await t.backup()).toMatchObject({ objects: 1 });
    const expected = await state('fossil', t.repo.srv);
    await fs.rm(t.repo.srv);
    await fs.rm(`${t.repo.srv}-journal`, { force: true });
    const dest = path.join(t.dir, 'restored.fossil');
    await t.restore(dest);
    expect(await state('fossil', dest)).toBe(expected);
  });
});

describe('either store', () => {
  test('restore without a backup throws BackupNotFound; the backed-up ids are listed', async () => {
    const dest = path.join(root, 'none.git');
    await expect(
      restoreRepository({ blob: s3, repoId: 999, kind: 'git', dest, tmpDir: path.join(root, 'tmp') }),
    ).rejects.toBeInstanceOf(BackupNotFound);
    await expect(fs.access(dest)).rejects.toThrow();
    expect(await backedUpRepositories(s3)).toEqual([101, 102, 103, 104]);
  });

  test('the filesystem store: a round trip with a stray object', async () => {
    const blob = new FsBlobStore(path.join(root, 'blobs'));
    await blob.init();
    const t = await setup('git', 7, blob);
    await t.repo.commit({ 'a.txt': 'a\n' }, 'a');
    await ok('git', ['push', '-q', 'origin', 'main'], t.repo.work);
    await t.backup();
    await t.repo.commit({ 'a.txt': 'b\n' }, 'b');
    await ok('git', ['push', '-q', 'origin', 'main'], t.repo.work);
    expect(await t.backup()).toMatchObject({ objects: 1 });
    await blob.put(dataKey(7, 3, 'bundle'), Buffer.from('stray'));
    const expected = await state('git', t.repo.srv);
    await t.restore(path.join(t.dir, 'restored.git'));
    expect(await state('git', path.join(t.dir, 'restored.git'))).toBe(expected);
    expect(await backedUpRepositories(blob)).toEqual([7]);
  });
});
