/**
 * What the executor tests share: a namespace where the chart's agent RBAC is applied as rendered
 * (steps in that same namespace), a kubeconfig of the agent's service account, a recorder of the
 * pods made there (and, re-exported, the jobs and steps the server would hand an agent).
 */
import { KubeConfig } from '@kubernetes/client-node';
import {
  CHART,
  PodRecorder,
  deleteNamespace,
  helmOk,
  kubectlOk,
  newNamespace,
  serviceAccountKubeconfig,
} from './kube.ts';

/** The chart's agent service account (release `t`). */
export const AGENT_SA = 't-triad-agent';

export type StepWorld = {
  ns: string;
  /** Kubeconfig file of the agent's service account. */
  kubeconfig: string;
  pods: PodRecorder;
  /** A client configuration acting as the agent's service account. */
  agentConfig(): KubeConfig;
  close(): Promise<void>;
};

/** A new namespace with the chart's agent RBAC (ServiceAccount, Role, RoleBinding) applied as rendered. */
export async function stepWorld(prefix: string): Promise<StepWorld> {
  const ns = await newNamespace(prefix);
  const rbac = await helmOk([
    ...['template', 't', CHART, '-n', ns, '--set', `agent.steps.namespace=${ns}`],
    ...['--show-only', 'templates/agent-rbac.yaml'],
  ]);
  await kubectlOk(['apply', '--validate=strict', '-f', '-'], { input: rbac });
  const kubeconfig = await serviceAccountKubeconfig(ns, AGENT_SA);
  const pods = await PodRecorder.start(ns);
  return {
    ns,
    kubeconfig,
    pods,
    agentConfig() {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfig);
      return kc;
    },
    async close() {
      pods.stop();
      await deleteNamespace(ns);
    },
  };
}

export { testJob, testStep } from '../../helpers/agent-jobs.ts';
