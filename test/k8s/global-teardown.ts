import pgTeardown from '../helpers/global-teardown.ts';
import type { ControlPlane } from './harness/control-plane.ts';

export default async function globalTeardown(): Promise<void> {
  const plane = (globalThis as { __triadK8s?: ControlPlane }).__triadK8s;
  try {
    await plane?.stop();
  } finally {
    await pgTeardown();
  }
}
