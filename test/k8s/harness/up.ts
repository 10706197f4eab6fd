/**
 * `npm run k8s:up`: the test control plane for poking at by hand. Builds the tools if needed,
 * starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback,
 * prints how to reach them, and stops everything on Ctrl-C (or SIGTERM).
 */
import { buildTools } from '../../../scripts/tools/build.ts';
import { toolDir } from '../../../scripts/tools/tools.ts';
import { startControlPlane } from './control-plane.ts';

await buildTools();
const plane = await startControlPlane();
process.stdout.write(
  [
    '',
    'Control plane up (Ctrl-C stops it and removes its directory):',
    `  export KUBECONFIG=${plane.kubeconfig}`,
    `  export PATH=${toolDir('kubernetes')}:${toolDir('helm')}:$PATH`,
    '  kubectl get nodes',
    `  process logs: ${plane.dir}/*.log`,
    '',
  ].join('\n'),
);
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  process.stdout.write('stopping...\n');
  plane.stop().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
