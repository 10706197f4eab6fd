import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, test } from '@jest/globals';
import type { V1Pod } from '@kubernetes/client-node';
import {
  classifyPending,
  cloneInitScript,
  defaultPodSpecOptions,
  isDns1123Label,
  labelValue,
  ownedSelector,
  stepPod,
  stepPodName,
  stepPodState,
  stepScript,
  workspaceClaimName,
  workspacePvc,
  EXIT_DEADLINE,
  EXIT_NOT_STARTED,
} from '../../agent/executors/pod-spec.ts';
import { parseKubernetesEnv } from '../../agent/executors/kubernetes.ts';
import { freePort } from '../../src/db/database.ts';
import type { Job, JobStep } from '../../agent/types.ts';

const run = promisify(execFile);

function job(over: Partial<Job> = {}): Job {
  return {
    pipeline_id: 42,
    number: 7,
    commit_node: 'abc123',
    branch: 'main',
    tag: '',
    event: 'push',
    events: ['push'],
    clone_url: 'http://triad.example:3000/acme/widgets',
    clone_token: null,
    vcs: 'git',
    org: 'acme',
    repo: 'widgets',
    steps: [],
    ci_env: { CI: 'true', CI_PIPELINE_ID: '42', CI_REPO: 'acme/widgets', SHARED: 'from-ci' },
    ...over,
  };
}

function step(over: Partial<JobStep> = {}): JobStep {
  return {
    id: 9,
    number: 2,
    name: 'test',
    image: 'node:24',
    commands: ['npm ci', 'npm test'],
    environment: { NODE_ENV: 'test', SHARED: 'from-step' },
    status: 'pending',
    ...over,
  };
}

const opts = defaultPodSpecOptions({ namespace: 'ci' });
const mainOf = (pod: V1Pod) => pod.spec!.containers[0]!;
const initOf = (pod: V1Pod) => pod.spec!.initContainers![0]!;
const envOf = (c: { env?: { name: string; value?: string }[] }) =>
  Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));

describe('names', () => {
  test('when a pod is named, then it is triad-p<pipeline>-s<step>-<suffix> and a valid DNS-1123 label', () => {
    expect(stepPodName(42, 3, 'a1b2c3')).toBe('triad-p42-s3-a1b2c3');
    expect(stepPodName(42, 3, '')).toBe('triad-p42-s3');
    expect(stepPodName(2147483647, 999, 'ZZ_top!')).toBe('triad-p2147483647-s999-zztop');
    expect(isDns1123Label(stepPodName(2147483647, 999, 'abcdefabcdefabcdef'))).toBe(true);
    expect(isDns1123Label(stepPod(job(), step(), opts, 'ffffff').metadata!.name!)).toBe(true);
  });

  test('when the workspace claim is named, then it is triad-ws-<pipeline>', () => {
    expect(workspaceClaimName(42)).toBe('triad-ws-42');
    expect(isDns1123Label(workspaceClaimName(2147483647))).toBe(true);
  });

  test('when names are checked, then invalid DNS-1123 labels are refused', () => {
    for (const bad of ['', 'Upper', '-lead', 'trail-', 'under_score', 'a'.repeat(64), 'dot.ted'])
      expect([bad, isDns1123Label(bad)]).toEqual([bad, false]);
    expect(isDns1123Label('a'.repeat(63))).toBe(true);
  });

  test('when an instance name is used as a label value, then it is made valid', () => {
    expect(labelValue('triad-agent-7d9f8-xk2p')).toBe('triad-agent-7d9f8-xk2p');
    expect(labelValue('-my host@example.com-')).toBe('my-host-example.com');
    expect(labelValue('x'.repeat(80))).toHaveLength(63);
  });
});

describe('workspace PVC', () => {
  test('when defaults are used, then it is ReadWriteOnce, 1Gi, default storage class, labelled', () => {
    const pvc = workspacePvc(job(), opts);
    expect(pvc.metadata!.name).toBe('triad-ws-42');
    expect(pvc.metadata!.namespace).toBe('ci');
    expect(pvc.metadata!.labels).toEqual({
      'app.kubernetes.io/managed-by': 'triad-agent',
      'triad.dev/pipeline': '42',
    });
    expect(pvc.spec).toEqual({ accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } });
  });

  test('when size, storage class, access mode and instance are set, then the PVC carries them', () => {
    const pvc = workspacePvc(
      job(),
      defaultPodSpecOptions({
        workspaceSize: '5Gi',
        storageClass: 'fast',
        workspaceAccessMode: 'ReadWriteMany',
        instance: 'agent-0',
      }),
    );
    expect(pvc.spec).toEqual({
      accessModes: ['ReadWriteMany'],
      resources: { requests: { storage: '5Gi' } },
      storageClassName: 'fast',
    });
    expect(pvc.metadata!.labels!['triad.dev/agent']).toBe('agent-0');
  });

  test('when an owner is given, then the PVC has it as owner reference', () => {
    const owner = { apiVersion: 'v1', kind: 'Pod', name: 'agent-0', uid: 'u-1', controller: false };
    expect(workspacePvc(job(), defaultPodSpecOptions({ owner })).metadata!.ownerReferences).toEqual([owner]);
    expect(workspacePvc(job(), opts).metadata!.ownerReferences).toBeUndefined();
  });
});

describe('step pod', () => {
  const pod = stepPod(job(), step(), opts, 'abc');

  test('when built, then it never restarts and runs the step image with sh -c', () => {
    expect(pod.spec!.restartPolicy).toBe('Never');
    expect(mainOf(pod).name).toBe('step');
    expect(mainOf(pod).image).toBe('node:24');
    expect(mainOf(pod).command).toEqual(['sh', '-c', stepScript(['npm ci', 'npm test'])]);
  });

  test('when built, then env is step.environment + ci_env with ci_env winning, plus a workspace HOME', () => {
    expect(envOf(mainOf(pod))).toEqual({
      HOME: '/workspace/home',
      NODE_ENV: 'test',
      CI: 'true',
      CI_PIPELINE_ID: '42',
      CI_REPO: 'acme/widgets',
      SHARED: 'from-ci',
    });
  });

  test('when an explicit env is passed, then it is used as is and may override HOME', () => {
    const p = stepPod(job(), step(), opts, 'abc', { A: '1', HOME: '/root' });
    expect(envOf(mainOf(p))).toEqual({ HOME: '/root', A: '1' });
  });

  test('when built, then the workspace PVC is mounted and the working dir is the checkout', () => {
    expect(pod.spec!.volumes).toEqual([
      { name: 'workspace', persistentVolumeClaim: { claimName: 'triad-ws-42' } },
    ]);
    for (const c of [mainOf(pod), initOf(pod)])
      expect(c.volumeMounts).toEqual([{ name: 'workspace', mountPath: '/workspace' }]);
    expect(mainOf(pod).workingDir).toBe('/workspace/src');
    const other = stepPod(job(), step(), defaultPodSpecOptions({ workspaceDir: '/ws' }), 'abc');
    expect(mainOf(other).workingDir).toBe('/ws/src');
    expect(mainOf(other).volumeMounts![0]!.mountPath).toBe('/ws');
  });

  test('when built, then it has the pipeline, step and managed-by labels', () => {
    expect(pod.metadata!.labels).toEqual({
      'app.kubernetes.io/managed-by': 'triad-agent',
      'triad.dev/pipeline': '42',
      'triad.dev/step': '2',
    });
    expect(pod.metadata!.annotations).toMatchObject({
      'triad.dev/repo': 'acme/widgets',
      'triad.dev/commit': 'abc123',
      'triad.dev/step-name': 'test',
    });
    const owned = stepPod(job(), step(), defaultPodSpecOptions({ instance: 'agent-x' }), 'abc');
    expect(owned.metadata!.labels!['triad.dev/agent']).toBe('agent-x');
  });

  test('when built, then activeDeadlineSeconds defaults to 3600 and follows the option', () => {
    expect(pod.spec!.activeDeadlineSeconds).toBe(3600);
    const p = stepPod(job(), step(), defaultPodSpecOptions({ deadlineSeconds: 90 }), 'abc');
    expect(p.spec!.activeDeadlineSeconds).toBe(90);
    // a step timeout shorter than the deadline brings it forward (a minute after the timeout)
    const timed = { ...step(), timeout_seconds: 120 };
    expect(stepPod(job(), timed, defaultPodSpecOptions(), 'abc').spec!.activeDeadlineSeconds).toBe(180);
    expect(
      stepPod(job(), timed, defaultPodSpecOptions({ deadlineSeconds: 90 }), 'abc').spec!
        .activeDeadlineSeconds,
    ).toBe(90);
  });

  test('when no resources are configured, then containers have none; when set, both containers get them', () => {
    expect(mainOf(pod).resources).toBeUndefined();
    const p = stepPod(
      job(),
      step(),
      defaultPodSpecOptions({ requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } }),
      'abc',
    );
    const want = { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } };
    expect(mainOf(p).resources).toEqual(want);
    expect(initOf(p).resources).toEqual(want);
    const limitsOnly = stepPod(job(), step(), defaultPodSpecOptions({ limits: { cpu: '2' } }), 'abc');
    expect(mainOf(limitsOnly).resources).toEqual({ limits: { cpu: '2' } });
  });

  test('when a node selector and tolerations are set, then the pod has them; else none', () => {
    expect(pod.spec!.nodeSelector).toBeUndefined();
    expect(pod.spec!.tolerations).toBeUndefined();
    const tolerations = [{ key: 'ci', operator: 'Exists', effect: 'NoSchedule' }];
    const p = stepPod(
      job(),
      step(),
      defaultPodSpecOptions({ nodeSelector: { pool: 'ci' }, tolerations }),
      'abc',
    );
    expect(p.spec!.nodeSelector).toEqual({ pool: 'ci' });
    expect(p.spec!.tolerations).toEqual(tolerations);
  });

  test('when no service account is set, then no token is mounted; when set, it is used', () => {
    expect(pod.spec!.serviceAccountName).toBeUndefined();
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
    const p = stepPod(job(), step(), defaultPodSpecOptions({ serviceAccountName: 'ci-runner' }), 'abc');
    expect(p.spec!.serviceAccountName).toBe('ci-runner');
    expect(p.spec!.automountServiceAccountToken).toBeUndefined();
  });

  test('when defaults are used, then the pod runs as 1000, non-root, with a restricted security context', () => {
    expect(pod.spec!.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    for (const c of [mainOf(pod), initOf(pod)])
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      });
    expect(pod.spec!.enableServiceLinks).toBe(false);
  });

  test('when runAsNonRoot is off and no user is set, then the image user is kept', () => {
    const p = stepPod(
      job(),
      step(),
      defaultPodSpecOptions({
        runAsNonRoot: false,
        runAsUser: undefined,
        runAsGroup: undefined,
        fsGroup: undefined,
      }),
      'abc',
    );
    expect(p.spec!.securityContext).toEqual({
      runAsNonRoot: false,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(mainOf(p).securityContext!.runAsNonRoot).toBe(false);
    expect(mainOf(p).securityContext!.allowPrivilegeEscalation).toBe(false);
  });

  test('when image pull secrets are set, then the pod references them', () => {
    expect(pod.spec!.imagePullSecrets).toBeUndefined();
    const p = stepPod(job(), step(), defaultPodSpecOptions({ imagePullSecrets: ['reg-a', 'reg-b'] }), 'abc');
    expect(p.spec!.imagePullSecrets).toEqual([{ name: 'reg-a' }, { name: 'reg-b' }]);
  });

  test('when built, then the init container clones with the clone image into the workspace', () => {
    expect(initOf(pod).name).toBe('clone');
    expect(initOf(pod).image).toBe('triad-clone:latest');
    expect(initOf(pod).command).toEqual(['sh', '-c', cloneInitScript(job(), '/workspace')]);
    expect(envOf(initOf(pod))).toMatchObject({ GIT_TERMINAL_PROMPT: '0', HGPLAIN: '1', USER: 'triad' });
    const p = stepPod(
      job(),
      step(),
      defaultPodSpecOptions({ cloneImage: 'registry.local/triad:1.2' }),
      'abc',
    );
    expect(initOf(p).image).toBe('registry.local/triad:1.2');
  });

  test('when clone commands are built, then git, hg and fossil clone at the commit with the token', () => {
    const token = 'tok-1';
    const git = cloneInitScript(job({ clone_token: token }), '/workspace');
    expect(git).toContain(
      "git clone -q --no-checkout 'http://ci:tok-1@triad.example:3000/acme/widgets' '/workspace/src' && git -C '/workspace/src' remote set-url origin 'http://triad.example:3000/acme/widgets' && git -C '/workspace/src' checkout -q 'abc123'",
    );
    const hg = cloneInitScript(job({ vcs: 'hg' }), '/workspace');
    expect(hg).toContain("hg clone -q -U 'http://triad.example:3000/acme/widgets' '/workspace/src' && ");
    // the checkout follows no subrepository
    expect(hg).toContain(
      "--config subrepos.allowed=false update -q -r 'abc123' && rm -f '/workspace/src/.hg/triad_nosubrepos.py'",
    );
    const fossil = cloneInitScript(job({ vcs: 'fossil', clone_token: token }), '/workspace');
    expect(fossil).toContain(
      "fossil clone -B 'ci:tok-1' 'http://triad.example:3000/acme/widgets' '/workspace/src.fossil'",
    );
    expect(fossil).toContain("fossil open -f '/workspace/src.fossil' 'abc123'");
    // the saved credential is deleted before the checkout
    expect(fossil).toContain(
      "PRAGMA secure_delete=ON; DELETE FROM config WHERE name GLOB '\\''http-auth:*'\\''",
    );
    for (const s of [git, hg, fossil]) {
      // no system or user VCS configuration, http(s) only
      expect(s).toContain('GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ALLOW_PROTOCOL=http:https');
      expect(s).toContain('HGRCPATH= HGPLAIN=1');
      expect(s).toContain("if [ -e '/workspace/.triad-cloned' ]; then exit 0; fi");
      expect(s.trimEnd().endsWith("touch '/workspace/.triad-cloned'")).toBe(true);
    }
  });
});

describe('scripts run by sh', () => {
  const dirs: string[] = [];
  const servers: ChildProcess[] = [];
  afterAll(async () => {
    for (const c of servers) c.kill('SIGKILL');
    for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
  });
  /** A static HTTP server of `dir` in another process (the scripts run synchronously here). */
  const serveFiles = async (dir: string): Promise<string> => {
    const port = await freePort();
    const c = spawn('/usr/bin/python3', ['-m', 'http.server', '--bind', '127.0.0.1', String(port)], {
      cwd: dir,
      stdio: 'ignore',
    });
    servers.push(c);
    for (let i = 0; i < 100; i++) {
      if ((await fetch(`http://127.0.0.1:${port}/HEAD`).catch(() => undefined))?.ok === true) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    return `http://127.0.0.1:${port}/`;
  };
  const tmp = async () => {
    const d = await fs.mkdtemp(path.join(os.tmpdir(), 'triad-podspec-'));
    dirs.push(d);
    return d;
  };
  const sh = (script: string, cwd?: string) =>
    spawnSync('sh', ['-c', script], {
      encoding: 'utf8',
      cwd,
      env: {
        PATH: process.env.PATH,
        HOME: os.tmpdir(),
        USER: 'triad',
        GIT_TERMINAL_PROMPT: '0',
        HGPLAIN: '1',
      },
    });

  test("when a step script runs, then only the commands' output is logged and it stops at the first failure", () => {
    const r = sh(stepScript(['echo hello', "echo 'it''s' \"$0\" | tr a-z A-Z", 'exit 3', 'echo never']));
    expect(r.status).toBe(3);
    expect(r.stdout).toBe(`hello\nITS SH\n`);
  });

  test('when a command fails mid-script, then its exit code is the step exit code', () => {
    const r = sh(stepScript(['false', 'echo never']));
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(sh(stepScript([])).status).toBe(0);
    expect(sh(stepScript(['if true; then\n  echo multi\nfi'])).stdout).toBe('multi\n');
  });

  async function sourceRepo(vcs: 'git' | 'hg' | 'fossil'): Promise<{ url: string; node: string }> {
    const d = await tmp();
    const env = { ...process.env, HOME: d, USER: 'triad', HGPLAIN: '1' };
    const x = (cmd: string, args: string[], cwd = d) => run(cmd, args, { cwd, env });
    if (vcs === 'git') {
      await x('git', ['init', '-q', '-b', 'main', 'r']);
      await fs.writeFile(path.join(d, 'r', 'f.txt'), 'one\n');
      await x(
        'git',
        ['-c', 'user.name=t', '-c', 'user.email=t@x', 'commit', '-qm', 'one', '--allow-empty'],
        path.join(d, 'r'),
      );
      await x('git', ['add', 'f.txt'], path.join(d, 'r'));
      await x('git', ['-c', 'user.name=t', '-c', 'user.email=t@x', 'commit', '-qm', 'f'], path.join(d, 'r'));
      const node = (await x('git', ['rev-parse', 'HEAD'], path.join(d, 'r'))).stdout.trim();
      // the clone takes http(s) only: served as files ("dumb" HTTP) by a process of its own
      await x('git', ['update-server-info'], path.join(d, 'r'));
      return { url: await serveFiles(path.join(d, 'r', '.git')), node };
    }
    if (vcs === 'hg') {
      await x('hg', ['init', 'r']);
      await fs.writeFile(path.join(d, 'r', 'f.txt'), 'one\n');
      await x('hg', ['commit', '-q', '-A', '-u', 't', '-m', 'f'], path.join(d, 'r'));
      const node = (await x('hg', ['log', '-r', '.', '-T', '{node}'], path.join(d, 'r'))).stdout.trim();
      return { url: `file://${path.join(d, 'r')}`, node };
    }
    await x('fossil', ['init', 'r.fossil']);
    await fs.mkdir(path.join(d, 'co'));
    await x('fossil', ['open', '-f', path.join(d, 'r.fossil')], path.join(d, 'co'));
    await fs.writeFile(path.join(d, 'co', 'f.txt'), 'one\n');
    await x('fossil', ['add', 'f.txt'], path.join(d, 'co'));
    await x('fossil', ['commit', '-m', 'f', '--no-warnings'], path.join(d, 'co'));
    const info = (await x('fossil', ['info'], path.join(d, 'co'))).stdout;
    const node = /checkout:\s+([0-9a-f]+)/.exec(info)![1]!;
    return { url: `file://${path.join(d, 'r.fossil')}`, node };
  }

  test.each(['git', 'hg', 'fossil'] as const)(
    'when the %s init script runs twice, then the checkout is at the commit and the second run is a no-op',
    async (vcs) => {
      const src = await sourceRepo(vcs);
      const ws = await tmp();
      const script = cloneInitScript(job({ vcs, clone_url: src.url, commit_node: src.node }), ws);
      const first = sh(script, ws);
      expect([first.status, first.stderr]).toEqual([0, '']);
      expect(await fs.readFile(path.join(ws, 'src', 'f.txt'), 'utf8')).toBe('one\n');
      expect((await fs.stat(path.join(ws, 'home'))).isDirectory()).toBe(true);
      await fs.writeFile(path.join(ws, 'src', 'f.txt'), 'changed by step 1\n');
      const second = sh(script, ws);
      expect(second.status).toBe(0);
      expect(await fs.readFile(path.join(ws, 'src', 'f.txt'), 'utf8')).toBe('changed by step 1\n');
    },
  );

  test('when a git clone URL is not http(s), then the clone refuses it', async () => {
    const src = await sourceRepo('hg');
    const ws = await tmp();
    const r = sh(cloneInitScript(job({ clone_url: src.url }), ws), ws);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("transport 'file' not allowed");
  });

  test('when the clone fails, then the script fails and leaves no marker', async () => {
    const ws = await tmp();
    const r = sh(cloneInitScript(job({ clone_url: `file://${ws}/missing` }), ws), ws);
    expect(r.status).not.toBe(0);
    await expect(fs.stat(path.join(ws, '.triad-cloned'))).rejects.toThrow();
  });
});

describe('pod status', () => {
  const base = (status: V1Pod['status']): V1Pod => ({ metadata: { name: 'p' }, status });
  const waiting = (name: string, reason: string, message = '') => ({
    name,
    image: name === 'clone' ? 'triad-clone:latest' : 'nope:1',
    imageID: '',
    ready: false,
    restartCount: 0,
    state: { waiting: { reason, message } },
  });

  test.each(['ImagePullBackOff', 'ErrImagePull', 'InvalidImageName', 'CreateContainerConfigError'])(
    'when the step container waits with %s, then the pending pod is classified so',
    (reason) => {
      const pod = base({ phase: 'Pending', containerStatuses: [waiting('step', reason, 'details')] });
      expect(classifyPending(pod)).toEqual({
        reason,
        message: 'container step (nope:1): details',
        fatal: reason === 'InvalidImageName',
      });
      expect(stepPodState(pod)).toEqual({ kind: 'pending', problem: classifyPending(pod), cloning: false });
    },
  );

  test('when the clone image cannot be pulled, then that is the problem', () => {
    const pod = base({ phase: 'Pending', initContainerStatuses: [waiting('clone', 'ErrImagePull')] });
    expect(classifyPending(pod)?.reason).toBe('ErrImagePull');
  });

  test('when the pod cannot be scheduled, then it is Unschedulable with the scheduler message', () => {
    const pod = base({
      phase: 'Pending',
      conditions: [
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message: '0/3 nodes are available',
        },
      ],
    });
    expect(classifyPending(pod)).toEqual({
      reason: 'Unschedulable',
      message: '0/3 nodes are available',
      fatal: false,
    });
  });

  test('when a pod is just creating containers or cloning, then there is no problem', () => {
    expect(classifyPending(base({ phase: 'Pending' }))).toBeUndefined();
    const cloning = base({
      phase: 'Pending',
      initContainerStatuses: [{ ...waiting('clone', ''), state: { running: {} } }],
      containerStatuses: [waiting('step', 'PodInitializing')],
    });
    expect(stepPodState(cloning)).toEqual({ kind: 'pending', problem: undefined, cloning: true });
  });

  const terminated = (exitCode: number, reason?: string, extra: Partial<NonNullable<V1Pod['status']>> = {}) =>
    base({
      phase: exitCode === 0 ? 'Succeeded' : 'Failed',
      containerStatuses: [
        {
          ...waiting('step', ''),
          state: { terminated: { exitCode, ...(reason === undefined ? {} : { reason }) } },
        },
      ],
      ...extra,
    });

  test('when the step container terminated, then its exit code is the result; OOMKilled is kept as reason', () => {
    expect(stepPodState(terminated(0, 'Completed'))).toMatchObject({
      kind: 'terminated',
      exitCode: 0,
      reason: undefined,
    });
    expect(stepPodState(terminated(3, 'Error'))).toMatchObject({
      kind: 'terminated',
      exitCode: 3,
      reason: undefined,
    });
    expect(stepPodState(terminated(137, 'OOMKilled'))).toMatchObject({
      kind: 'terminated',
      exitCode: 137,
      reason: 'OOMKilled',
    });
    expect(stepPodState(terminated(137, 'Error', { reason: 'DeadlineExceeded' }))).toMatchObject({
      kind: 'terminated',
      reason: 'DeadlineExceeded',
    });
  });

  test('when the step container runs, then the state is running', () => {
    const pod = base({
      phase: 'Running',
      containerStatuses: [{ ...waiting('step', ''), state: { running: {} } }],
    });
    expect(stepPodState(pod)).toEqual({ kind: 'running' });
  });

  test('when the clone init container failed, then the state is clone-failed with its exit code', () => {
    const pod = base({
      phase: 'Failed',
      initContainerStatuses: [
        { ...waiting('clone', ''), state: { terminated: { exitCode: 128, reason: 'Error' } } },
      ],
      containerStatuses: [waiting('step', 'PodInitializing')],
    });
    expect(stepPodState(pod)).toEqual({ kind: 'clone-failed', exitCode: 128, reason: 'Error' });
  });

  test('when the pod failed before the step ran (deadline, eviction), then the state says why', () => {
    expect(stepPodState(base({ phase: 'Failed', reason: 'DeadlineExceeded', message: 'too long' }))).toEqual({
      kind: 'failed',
      exitCode: EXIT_DEADLINE,
      reason: 'DeadlineExceeded',
      message: 'too long',
    });
    expect(stepPodState(base({ phase: 'Failed', reason: 'Evicted' }))).toMatchObject({
      kind: 'failed',
      exitCode: EXIT_NOT_STARTED,
      reason: 'Evicted',
    });
  });
});

describe('selectors', () => {
  test('when an instance and pipeline are given, then the selector narrows to them', () => {
    expect(ownedSelector(undefined)).toBe('app.kubernetes.io/managed-by=triad-agent');
    expect(ownedSelector('agent-0', 5)).toBe(
      'app.kubernetes.io/managed-by=triad-agent,triad.dev/agent=agent-0,triad.dev/pipeline=5',
    );
  });
});

describe('kubernetesExecutorFromEnv variables', () => {
  const nsFile = path.join(os.tmpdir(), `triad-no-such-ns-${process.pid}`);

  test('when nothing is set, then the defaults apply', () => {
    const { options, inCluster } = parseKubernetesEnv({ POD_NAME: 'agent-0' }, nsFile);
    expect(inCluster).toBe(false);
    expect(options.pendingTimeoutMs).toBe(120_000);
    expect(options.selfPod).toBeUndefined();
    expect(options.pod).toEqual(
      defaultPodSpecOptions({ namespace: 'default', instance: 'agent-0', requests: {}, limits: {} }),
    );
  });

  test('when the service account namespace file exists, then it is the default namespace and owner refs are on', async () => {
    const f = path.join(os.tmpdir(), `triad-ns-${process.pid}`);
    await fs.writeFile(f, 'triad-ci\n');
    try {
      const { options } = parseKubernetesEnv({ POD_NAME: 'agent-0', KUBERNETES_SERVICE_HOST: '10.0.0.1' }, f);
      expect(options.pod.namespace).toBe('triad-ci');
      expect(options.selfPod).toBe('agent-0');
      const other = parseKubernetesEnv({ POD_NAME: 'agent-0', TRIAD_AGENT_NAMESPACE: 'builds' }, f);
      expect(other.options.pod.namespace).toBe('builds');
      expect(other.options.selfPod).toBeUndefined();
    } finally {
      await fs.rm(f);
    }
  });

  test('when every variable is set, then each lands in the options', () => {
    const { options } = parseKubernetesEnv(
      {
        TRIAD_AGENT_NAMESPACE: 'builds',
        TRIAD_AGENT_PENDING_TIMEOUT: '30',
        TRIAD_AGENT_POD_DEADLINE_SECONDS: '600',
        TRIAD_AGENT_CLONE_IMAGE: 'reg/triad:1',
        TRIAD_AGENT_WORKSPACE_SIZE: '10Gi',
        TRIAD_AGENT_WORKSPACE_ACCESS_MODE: 'ReadWriteMany',
        TRIAD_AGENT_STORAGE_CLASS: 'nfs',
        TRIAD_AGENT_SERVICE_ACCOUNT: 'ci',
        TRIAD_AGENT_NODE_SELECTOR: 'pool=ci, arch=amd64',
        TRIAD_AGENT_TOLERATIONS: '[{"key":"ci","operator":"Exists","effect":"NoSchedule"}]',
        TRIAD_AGENT_CPU_REQUEST: '500m',
        TRIAD_AGENT_CPU_LIMIT: '2',
        TRIAD_AGENT_MEMORY_REQUEST: '512Mi',
        TRIAD_AGENT_MEMORY_LIMIT: '2Gi',
        TRIAD_AGENT_RUN_AS_USER: '2000',
        TRIAD_AGENT_IMAGE_PULL_SECRETS: 'a, b',
        TRIAD_AGENT_INSTANCE: 'inst',
        TRIAD_AGENT_UNRELATED: 'x',
      },
      nsFile,
    );
    expect(options.pendingTimeoutMs).toBe(30_000);
    expect(options.pod).toEqual({
      namespace: 'builds',
      cloneImage: 'reg/triad:1',
      workspaceDir: '/workspace',
      workspaceSize: '10Gi',
      workspaceAccessMode: 'ReadWriteMany',
      storageClass: 'nfs',
      deadlineSeconds: 600,
      requests: { cpu: '500m', memory: '512Mi' },
      limits: { cpu: '2', memory: '2Gi' },
      nodeSelector: { pool: 'ci', arch: 'amd64' },
      tolerations: [{ key: 'ci', operator: 'Exists', effect: 'NoSchedule' }],
      serviceAccountName: 'ci',
      runAsUser: 2000,
      runAsGroup: 2000,
      fsGroup: 2000,
      runAsNonRoot: true,
      imagePullSecrets: ['a', 'b'],
      instance: 'inst',
    });
  });

  test('when the node selector is JSON, then it is parsed as such', () => {
    const { options } = parseKubernetesEnv(
      { TRIAD_AGENT_NODE_SELECTOR: '{"kubernetes.io/os":"linux"}' },
      nsFile,
    );
    expect(options.pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
  });

  test('when the user is 0 or "image", then root is allowed or the image user kept', () => {
    const root = parseKubernetesEnv({ TRIAD_AGENT_RUN_AS_USER: '0' }, nsFile).options.pod;
    expect([root.runAsUser, root.runAsNonRoot, root.fsGroup]).toEqual([0, false, undefined]);
    const image = parseKubernetesEnv({ TRIAD_AGENT_RUN_AS_USER: 'image' }, nsFile).options.pod;
    expect([image.runAsUser, image.runAsNonRoot, image.fsGroup]).toEqual([undefined, true, undefined]);
    const loose = parseKubernetesEnv(
      { TRIAD_AGENT_RUN_AS_NON_ROOT: 'false', TRIAD_AGENT_FS_GROUP: 'none' },
      nsFile,
    );
    expect([loose.options.pod.runAsNonRoot, loose.options.pod.fsGroup]).toEqual([false, undefined]);
  });

  test('when values are bad, then every problem is listed', () => {
    expect(() =>
      parseKubernetesEnv(
        {
          TRIAD_AGENT_PENDING_TIMEOUT: 'soon',
          TRIAD_AGENT_MEMORY_LIMIT: 'lots',
          TRIAD_AGENT_NODE_SELECTOR: 'novalue',
          TRIAD_AGENT_NAMESPACE: 'Bad_NS',
        },
        nsFile,
      ),
    ).toThrow(
      /TRIAD_AGENT_NAMESPACE.*TRIAD_AGENT_PENDING_TIMEOUT.*TRIAD_AGENT_NODE_SELECTOR.*TRIAD_AGENT_MEMORY_LIMIT/,
    );
    expect(() => parseKubernetesEnv({ TRIAD_AGENT_TOLERATIONS: '{' }, nsFile)).toThrow(
      /TRIAD_AGENT_TOLERATIONS/,
    );
  });

  test('when a variable is empty, then it counts as unset', () => {
    const { options } = parseKubernetesEnv(
      { TRIAD_AGENT_PENDING_TIMEOUT: '', TRIAD_AGENT_STORAGE_CLASS: ' ' },
      nsFile,
    );
    expect(options.pendingTimeoutMs).toBe(120_000);
    expect(options.pod.storageClass).toBeUndefined();
  });
});
