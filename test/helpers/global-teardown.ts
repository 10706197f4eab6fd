import fs from 'node:fs/promises';
import path from 'node:path';

export default async function globalTeardown(): Promise<void> {
  const g = (globalThis as { __triadPg?: { stop: () => Promise<void>; dir: string } }).__triadPg;
  if (g === undefined) return;
  const made = await fs.readFile(path.join(g.dir, 'temp-dirs'), 'utf8').catch(() => '');
  for (const dir of made.split('\n').filter(Boolean)) await fs.rm(dir, { recursive: true, force: true });
  await g.stop();
  await fs.rm(g.dir, { recursive: true, force: true });
}
