import fs from 'node:fs';
import path from 'node:path';
import pgSetup from '../helpers/global-setup.ts';
import { startControlPlane, type ControlPlane } from './harness/control-plane.ts';

/**
 * The k8s suite's global setup: the embedded PostgreSQL of the main suite (for the tests that
 * start a Triad server) and one Kubernetes control plane shared by every test file, each file
 * working in namespaces of its own. TRIAD_TEST_K8S names a JSON file with the connection details.
 */
export default async function globalSetup(): Promise<void> {
  await pgSetup();
  const plane = await startControlPlane();
  const file = path.join(plane.dir, 'info.json');
  // everything but the stop function
  fs.writeFileSync(file, JSON.stringify(plane));
  process.env.TRIAD_TEST_K8S = file;
  (globalThis as { __triadK8s?: ControlPlane }).__triadK8s = plane;
}
