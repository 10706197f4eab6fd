/**
 * Mercurial backups: one `hg bundle` per backup of the changesets that are not ancestors of the
 * previous manifest's heads (secret ones included), none when there is none. A bundle carries
 * changesets only as far as Triad needs: bookmarks, phases and local tags are the manifest's, set
 * after every bundle is applied. Global tags are `.hgtags` content, so they come with the changesets
 * (the manifest records them to check the restore). Triad enables no obsolescence, so there are no
 * obsolescence markers or hidden changesets to carry.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { HG } from '../../vcs/constants.ts';
import { runChecked } from '../../vcs/process/run.ts';
import { COMMAND_TIMEOUT_MS, type Captured, type HgRefs, type KindBackup } from './manifest.ts';

/**
 * zstd-compressed bundle2, its changegroup version chosen by Mercurial for the repository's format
 * (03 where the format needs it). Phases and bookmarks are left out: the manifest restores them.
 */
const BUNDLE_TYPE = 'zstd-v2';

async function hg(dir: string, args: string[], ok: number[] = [0]): Promise<{ code: number; out: string }> {
  const r = await runChecked(HG.bin, ['-R', dir, '--config', 'ui.interactive=false', ...args], {
    env: HG.env,
    timeoutMs: COMMAND_TIMEOUT_MS,
    ok,
  });
  return { code: r.code, out: r.stdout.toString('utf8') };
}

const F = '\x1f';
const L = '\x1e';
/** Sets a line's flags tell membership of: h a head, b a named branch head, d a root of the non-public changesets, s of the secret ones. */
const FLAGS: [string, string][] = [
  ['h', 'heads(all())'],
  ['b', 'head()'],
  ['d', 'roots(not public())'],
  ['s', 'roots(secret())'],
];
const STATE_REVS = `${FLAGS.map(([, set]) => set).join(' + ')} + bookmark() + tag()`;
const STATE_TEMPLATE =
  `{node}${F}{branch}${F}{join(bookmarks, "${L}")}${F}{join(tags, "${L}")}${F}` +
  FLAGS.map(([flag, set]) => `{ifcontains(rev, revset("${set}"), "${flag}")}`).join('') +
  '\n';

/**
 * The repository's heads and refs in one `hg log` (one Python start): every changeset that is a
 * head, a branch head, a phase root, bookmarked or tagged, with what it is.
 */
async function readState(dir: string): Promise<{ heads: string[]; refs: HgRefs }> {
  const { out } = await hg(dir, ['log', '-r', STATE_REVS, '-T', STATE_TEMPLATE]);
  const heads: string[] = [];
  const refs: HgRefs = { bookmarks: {}, branches: {}, tags: {}, phases: { draftRoots: [], secretRoots: [] } };
  for (const line of out.split('\n')) {
    if (line === '') continue;
    const [node = '', branch = '', bookmarks = '', tags = '', flags = ''] = line.split(F);
    for (const b of bookmarks.split(L)) if (b !== '') refs.bookmarks[b] = node;
    for (const t of tags.split(L)) if (t !== '' && t !== 'tip') refs.tags[t] = node;
    if (flags.includes('h')) heads.push(node);
    if (flags.includes('b')) (refs.branches[branch] ??= []).push(node);
    if (flags.includes('d')) refs.phases.draftRoots.push(node);
    if (flags.includes('s')) refs.phases.secretRoots.push(node);
  }
  const localtags = await fs.readFile(path.join(dir, '.hg', 'localtags'), 'utf8').catch(() => undefined);
  if (localtags !== undefined && localtags !== '') refs.localtags = localtags;
  return { heads: heads.sort(), refs: sorted(refs) };
}

/** The same refs always serialise the same (lists sorted), so a restore compares them as text. */
function sorted(r: HgRefs): HgRefs {
  const keys = <T>(o: Record<string, T>) =>
    Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1)));
  return {
    ...r,
    bookmarks: keys(r.bookmarks),
    tags: keys(r.tags),
    branches: keys(Object.fromEntries(Object.entries(r.branches).map(([b, h]) => [b, [...h].sort()]))),
    phases: { draftRoots: [...r.phases.draftRoots].sort(), secretRoots: [...r.phases.secretRoots].sort() },
  };
}

export const hgBackup: KindBackup<HgRefs> = {
  ext: 'hg',
  replaces: false,
  async capture(dir, prev, work): Promise<Captured<HgRefs>> {
    const { heads, refs } = await readState(dir);
    const file = path.join(work, 'new.hg');
    // `present()`: a base Mercurial does not know would abort the bundle (Triad never strips, so
    // this is only a guard); with no previous heads, everything.
    const base =
      prev === undefined || prev.heads.length === 0
        ? ['--all']
        : ['--base', prev.heads.map((h) => `present(${h})`).join(' + ')];
    // Exit 1: "no changes found", and no file.
    const { code } = await hg(dir, ['bundle', '--quiet', '--type', BUNDLE_TYPE, ...base, file], [0, 1]);
    return { data: code === 0 ? file : undefined, heads, refs };
  },

  async restore(stage, objects, m, work) {
    await fs.mkdir(path.dirname(stage), { recursive: true });
    // As the Mercurial driver's `init`: the default format of the installed Mercurial.
    await runChecked(HG.bin, ['init', stage], { env: HG.env, timeoutMs: COMMAND_TIMEOUT_MS });
    const files: string[] = [];
    for (const [i, key] of objects.keys.entries()) {
      const file = path.join(work, `${i}.hg`);
      await objects.fetch(key, file);
      files.push(file);
    }
    // One transaction for all of them; each bundle's parents come from the ones before it.
    if (files.length > 0) await hg(stage, ['unbundle', '--quiet', ...files]);
    await setRefs(stage, m.refs);
    const after = await readState(stage);
    if (JSON.stringify(after) !== JSON.stringify({ heads: [...m.heads].sort(), refs: sorted(m.refs) }))
      throw new Error('hg restore: the refs differ from the manifest');
  },
};

/** Bookmarks, phases and local tags exactly as `refs` (the changesets are all there). */
async function setRefs(dir: string, refs: HgRefs): Promise<void> {
  const now = (await readState(dir)).refs;
  const extra = Object.keys(now.bookmarks).filter((b) => refs.bookmarks[b] === undefined);
  if (extra.length > 0) await hg(dir, ['bookmark', '--delete', ...extra]);
  const byNode = new Map<string, string[]>();
  for (const [name, node] of Object.entries(refs.bookmarks))
    if (now.bookmarks[name] !== node) byNode.set(node, [...(byNode.get(node) ?? []), name]);
  for (const [node, names] of byNode) await hg(dir, ['bookmark', '--force', '--rev', node, ...names]);
  // A phase is the highest among the roots below a changeset, so: everything public, then the
  // recorded draft roots draft, then the secret roots secret (`--force` moves phases back).
  if (now.phases.draftRoots.length > 0) await hg(dir, ['phase', '--public', '--force', '--rev', 'all()']);
  const { draftRoots, secretRoots } = refs.phases;
  if (draftRoots.length > 0) await hg(dir, ['phase', '--draft', '--force', ...revs(draftRoots)]);
  if (secretRoots.length > 0) await hg(dir, ['phase', '--secret', '--force', ...revs(secretRoots)]);
  if (refs.localtags !== undefined) await fs.writeFile(path.join(dir, '.hg', 'localtags'), refs.localtags);
}

const revs = (nodes: readonly string[]) => nodes.flatMap((n) => ['--rev', n]);
