/**
 * Builds the pinned test tools (scripts/tools/tools.ts) from their Go modules into the tools cache,
 * skipping those already there: `node scripts/tools/build.ts [tool ...]` (`npm run tools`).
 *
 * Go's own module and build caches stay in their default places, so a rebuild after a version
 * change or a removed tools directory takes seconds to minutes instead of the cold ~20 minutes.
 * `GOTOOLCHAIN=local` (never download another Go) and `CGO_ENABLED=0` (static binaries, no C
 * compiler needed). Concurrent runs wait for each other through a lock file in the cache.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  ETCD_VERSION,
  HELM_VERSION,
  KUBERNETES_VERSION,
  TOOLS,
  TOOL_NAMES,
  isBuilt,
  toolDir,
  toolsDir,
  type ToolName,
} from './tools.ts';

const started = Date.now();
const elapsed = (since = started) => {
  const s = Math.round((Date.now() - since) / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
};
const say = (msg: string) => process.stderr.write(`[tools] ${msg}\n`);

const goEnv: NodeJS.ProcessEnv = {
  ...process.env,
  GOTOOLCHAIN: 'local',
  CGO_ENABLED: '0',
  GOFLAGS: '-trimpath',
  GO111MODULE: 'on',
};

/** Runs go with a heartbeat line every 60 s; output is shown only when it fails (or with -v). */
function go(args: string[], cwd: string, what: string, extraEnv: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const since = Date.now();
    say(`  ${what} ...`);
    const child = spawn(goBin, args, {
      cwd,
      env: { ...goEnv, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (verbose) process.stderr.write(d);
    });
    const beat = setInterval(() => say(`  ... still ${what} (${elapsed(since)})`), 60_000);
    child.on('error', (err) => {
      clearInterval(beat);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearInterval(beat);
      if (code === 0) {
        say(`  ${what}: done in ${elapsed(since)}`);
        resolve(out);
      } else
        reject(
          new Error(
            `go ${args.join(' ')} failed (${signal ?? `exit ${code}`}):\n${(err + out).slice(-6000)}`,
          ),
        );
    });
  });
}

const verbose = process.argv.includes('-v');

/** `go` from PATH, else the usual install locations (a non-login shell may lack /usr/local/go/bin). */
let goBin = 'go';

function checkGo(): string {
  for (const candidate of [
    'go',
    path.join(process.env.GOROOT ?? '/usr/local/go', 'bin', 'go'),
    '/usr/local/go/bin/go',
  ]) {
    const r = spawnSync(candidate, ['version'], { env: goEnv, encoding: 'utf8' });
    if (r.error === undefined && r.status === 0) {
      goBin = candidate;
      return r.stdout.trim();
    }
  }
  throw new Error(
    'Go is needed to build the Kubernetes test tools (etcd, kube-apiserver, kubectl, helm, kwok, ' +
      'MinIO) but `go` was not found on PATH (or does not run). Install Go 1.25 or newer ' +
      '(for example from your distribution, or put /usr/local/go/bin on PATH), or set ' +
      `TRIAD_TOOLS_DIR to a directory that already holds the built tools (${toolsDir()}).`,
  );
}

/** `<dir>.tmp-<pid>` filled by `fill`, then renamed to `<dir>`. */
async function install(name: ToolName, fill: (tmp: string) => Promise<void>): Promise<void> {
  const dir = toolDir(name);
  const tmp = `${dir}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  try {
    await fill(tmp);
    for (const b of [
      ...TOOLS[name].binaries,
      ...(TOOLS[name].module?.files ?? []).map((f) => path.basename(f)),
    ])
      if (!fs.existsSync(path.join(tmp, b))) throw new Error(`${name}: ${b} was not built`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** `go install pkg@version` with GOBIN = the tool's directory. */
async function goInstall(name: ToolName, pkg: string, ldflags: string[] = []): Promise<void> {
  const t = TOOLS[name];
  say(`building ${name} ${t.version}`);
  await install(name, async (tmp) => {
    const args = ['install'];
    if (ldflags.length > 0) args.push(`-ldflags=${ldflags.join(' ')}`);
    await go(args.concat(`${pkg}@${t.version}`), tmp, `go install ${pkg}@${t.version}`, { GOBIN: tmp });
  });
}

/** A CRD set: the module is downloaded (Go module cache) and the listed files copied. */
async function copyCrds(name: ToolName): Promise<void> {
  const t = TOOLS[name];
  const m = t.module!;
  say(`fetching ${name} ${t.version} (${m.path})`);
  await install(name, async (tmp) => {
    const info = JSON.parse(
      await go(
        ['mod', 'download', '-json', `${m.path}@${t.version}`],
        tmp,
        `go mod download ${m.path}@${t.version}`,
      ),
    ) as { Dir: string };
    for (const f of m.files) fs.copyFileSync(path.join(info.Dir, f), path.join(tmp, path.basename(f)));
  });
}

/** The staging modules kubernetes' go.mod replaces with `./staging/...`, as module paths. */
function stagingModules(goMod: string): string[] {
  const mods: string[] = [];
  for (const line of goMod.split('\n')) {
    const m = /^\s*(?:replace\s+)?(k8s\.io\/[^\s]+)\s+=>\s+\.\/staging\//.exec(line);
    if (m !== null) mods.push(m[1]!);
  }
  return mods;
}

/**
 * kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd: `go install` of
 * k8s.io/kubernetes' commands is refused (its go.mod replaces the staging modules with local
 * directories), so a throw-away module requires k8s.io/kubernetes and points each staging module
 * at its published v0.X.Y twin.
 */
async function buildKubernetes(which: ToolName[]): Promise<void> {
  const root = toolsDir();
  const work = path.join(root, `.work-kubernetes-${KUBERNETES_VERSION}-${process.pid}`);
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  try {
    say(`building ${which.map((n) => `${n} ${TOOLS[n].version}`).join(', ')}`);
    const info = JSON.parse(
      await go(
        ['mod', 'download', '-json', `k8s.io/kubernetes@${KUBERNETES_VERSION}`],
        work,
        'reading kubernetes go.mod',
      ),
    ) as { GoMod: string };
    const kmod = fs.readFileSync(info.GoMod, 'utf8');
    const staging = stagingModules(kmod);
    if (staging.length === 0) throw new Error('kubernetes go.mod: no staging replace lines found');
    const etcdInKube = /go\.etcd\.io\/etcd\/server\/v3 (v[^\s]+)/.exec(kmod)?.[1];
    if (etcdInKube !== ETCD_VERSION)
      throw new Error(
        `kubernetes ${KUBERNETES_VERSION} names etcd server ${etcdInKube}, tools.ts pins ${ETCD_VERSION}`,
      );
    const minor = KUBERNETES_VERSION.replace(/^v1\./, 'v0.');
    fs.writeFileSync(
      path.join(work, 'go.mod'),
      [
        'module triad.local/k8s-tools',
        '',
        'go 1.25',
        '',
        `require k8s.io/kubernetes ${KUBERNETES_VERSION}`,
        `require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}`,
        '',
        ...staging.map((m) => `replace ${m} => ${m} ${minor}`),
        '',
      ].join('\n'),
    );
    const cmds = [
      'k8s.io/kubernetes/cmd/kube-apiserver',
      'k8s.io/kubernetes/cmd/kube-controller-manager',
      'k8s.io/kubernetes/cmd/kube-scheduler',
      'k8s.io/kubernetes/cmd/kubectl',
      'go.etcd.io/etcd/server/v3',
    ];
    fs.writeFileSync(
      path.join(work, 'tools.go'),
      [
        '//go:build tools',
        '',
        'package tools',
        '',
        'import (',
        ...cmds.map((c) => `\t_ "${c}"`),
        ')',
        '',
      ].join('\n'),
    );
    await go(['mod', 'tidy'], work, 'resolving modules (go mod tidy; downloads on the first run)');
    const [maj, min] = KUBERNETES_VERSION.replace(/^v/, '').split('.');
    const ver = (pkg: string) => [
      `-X ${pkg}.gitVersion=${KUBERNETES_VERSION}`,
      `-X ${pkg}.gitMajor=${maj}`,
      `-X ${pkg}.gitMinor=${min}`,
      `-X ${pkg}.gitTreeState=clean`,
    ];
    const kubeLdflags = [
      '-s',
      '-w',
      ...ver('k8s.io/component-base/version'),
      ...ver('k8s.io/client-go/pkg/version'),
    ];
    if (which.includes('kubernetes'))
      await install('kubernetes', async (tmp) => {
        for (const b of TOOLS.kubernetes.binaries)
          await go(
            [
              'build',
              `-ldflags=${kubeLdflags.join(' ')}`,
              '-o',
              path.join(tmp, b),
              `k8s.io/kubernetes/cmd/${b}`,
            ],
            work,
            `go build ${b}`,
          );
      });
    if (which.includes('etcd'))
      await install('etcd', async (tmp) => {
        await go(
          ['build', '-ldflags=-s -w', '-o', path.join(tmp, 'etcd'), 'go.etcd.io/etcd/server/v3'],
          work,
          'go build etcd',
        );
      });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

async function buildHelm(): Promise<void> {
  // helm's default .Capabilities.KubeVersion (helm template, lint) follows the client-go it uses.
  const info = JSON.parse(
    await go(
      ['mod', 'download', '-json', `helm.sh/helm/v3@${HELM_VERSION}`],
      toolsDir(),
      'reading helm go.mod',
    ),
  ) as { GoMod: string };
  const clientGo = /k8s\.io\/client-go v0\.(\d+)\./.exec(fs.readFileSync(info.GoMod, 'utf8'))?.[1] ?? '20';
  const x = (v: string, val: string) => `-X helm.sh/helm/v3/${v}=${val}`;
  await goInstall('helm', 'helm.sh/helm/v3/cmd/helm', [
    '-s',
    '-w',
    x('internal/version.version', HELM_VERSION),
    x('internal/version.gitTreeState', 'clean'),
    x('pkg/chartutil.k8sVersionMajor', '1'),
    x('pkg/chartutil.k8sVersionMinor', clientGo),
    x('pkg/lint/rules.k8sVersionMajor', '1'),
    x('pkg/lint/rules.k8sVersionMinor', clientGo),
  ]);
}

/** One build at a time per cache: a lock file holding the builder's pid (a dead holder's lock is taken over). */
async function withLock<T>(fn: () => Promise<T>): Promise<T> {
  const lock = path.join(toolsDir(), '.build.lock');
  let waitingSaid = false;
  for (;;) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(fs.readFileSync(lock, 'utf8').trim());
      let alive: boolean;
      try {
        if (holder > 0) process.kill(holder, 0);
        alive = holder > 0;
      } catch {
        alive = false;
      }
      if (!alive) {
        fs.rmSync(lock, { force: true });
        continue;
      }
      if (!waitingSaid) say(`another build (pid ${holder}) holds ${lock}; waiting for it`);
      waitingSaid = true;
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  removeAbandoned();
  try {
    return await fn();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

/** Temporary directories of builds that were killed (their pid is gone). */
function removeAbandoned(): void {
  for (const e of fs.readdirSync(toolsDir())) {
    const pid = Number(/(?:\.tmp-|^\.work-.*-)(\d+)$/.exec(e)?.[1] ?? 0);
    if (pid === 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      fs.rmSync(path.join(toolsDir(), e), { recursive: true, force: true });
    }
  }
}

export async function buildTools(names: readonly ToolName[] = TOOL_NAMES): Promise<ToolName[]> {
  const wanted = names.filter((n) => !isBuilt(n));
  if (wanted.length === 0) return [];
  fs.mkdirSync(toolsDir(), { recursive: true });
  const goVersion = checkGo();
  return withLock(async () => {
    const todo = names.filter((n) => !isBuilt(n)); // another run may have built some meanwhile
    if (todo.length === 0) return [];
    say(`${goVersion}; cache ${toolsDir()}`);
    const big = todo.some((n) => n === 'kubernetes' || n === 'minio' || n === 'helm');
    say(
      `building ${todo.join(', ')} from Go modules` +
        (big
          ? ' (once: ~20 min on 2 idle cores, longer on a busy machine; ~3 GB of Go modules and ~5 GB of ' +
            'Go build cache; later runs reuse the binaries)'
          : ''),
    );
    const kube = todo.filter((n): n is ToolName => n === 'kubernetes' || n === 'etcd');
    if (kube.length > 0) await buildKubernetes(kube);
    if (todo.includes('helm')) await buildHelm();
    if (todo.includes('kwok')) await goInstall('kwok', 'sigs.k8s.io/kwok/cmd/kwok', ['-s', '-w']);
    if (todo.includes('minio')) await goInstall('minio', 'github.com/minio/minio', ['-s', '-w']);
    for (const n of todo) if (TOOLS[n].module !== undefined) await copyCrds(n);
    say(`built ${todo.join(', ')} in ${elapsed()}`);
    return todo;
  });
}

const isMain =
  process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(import.meta.filename);
if (isMain) {
  const args = process.argv.slice(2).filter((a) => a !== '-v');
  const bad = args.filter((a) => !(TOOL_NAMES as string[]).includes(a));
  if (bad.length > 0) {
    say(`unknown tool(s) ${bad.join(', ')}; known: ${TOOL_NAMES.join(', ')}`);
    process.exit(2);
  }
  const names = args.length === 0 ? TOOL_NAMES : (args as ToolName[]);
  buildTools(names).then(
    (built) => {
      if (built.length === 0)
        say(`up to date in ${toolsDir()}: ${names.map((n) => `${n}-${TOOLS[n].version}`).join(', ')}`);
    },
    (err: unknown) => {
      say(`FAILED: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}
