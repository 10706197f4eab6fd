import fs from 'node:fs/promises';

export default async function globalTeardown(): Promise<void> {
  const g = (globalThis as { __triadPg?: { stop: () => Promise<void>; dir: string } }).__triadPg;
  if (g === undefined) return;
  await g.stop();
  await fs.rm(g.dir, { recursive: true, force: true });
}
