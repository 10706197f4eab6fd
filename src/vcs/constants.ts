/**
 * Per-kind constants, in one place: which binary runs, with which environment, how long a short
 * commit id is, what a new repository's default branch is called. Every module of a kind (reader,
 * snapshots, operations, transport, recovery) takes them from here.
 */

export const VCS_KINDS = ['hg', 'git', 'fossil'] as const;
export type VcsKind = (typeof VCS_KINDS)[number];

export type VcsConstants = {
  /** Name shown to people ("This is the clone URL of a Mercurial repository"). */
  readonly label: string;
  /** The VCS command. Mercurial's is absolute: the `python3` an `hg` on PATH finds may lack it. */
  readonly bin: string;
  /**
   * Environment of every command Triad runs on a repository of this kind (not of the CGI
   * backends, whose environment is the request's): no prompts, no user or system configuration
   * that could change what a command prints or does, UTF-8 output.
   */
  readonly env: NodeJS.ProcessEnv;
  /** Characters of a commit id in `short_id`. */
  readonly shortId: number;
  /** The default branch of a new repository (`default_branch`). */
  readonly defaultBranch: string;
  /**
   * What a pull request's refs are called in its `ref_type` (Mercurial: bookmarks, also when a
   * ref names a named branch; Git, Fossil: branches).
   */
  readonly refType: 'branch' | 'bookmark';
  /** The default target of a pull request when it is not the repository's default branch. */
  readonly pullTarget?: string;
};

export const GIT = {
  label: 'Git',
  bin: 'git',
  env: {
    ...process.env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    LANG: 'C.UTF-8',
  },
  shortId: 12,
  defaultBranch: 'main',
  refType: 'branch',
} as const satisfies VcsConstants & Record<string, unknown>;

export const HG = {
  label: 'Mercurial',
  bin: '/usr/bin/hg',
  env: { ...process.env, HGPLAIN: '1', HGENCODING: 'UTF-8', HGRCPATH: '', LANG: 'C.UTF-8' },
  shortId: 12,
  defaultBranch: 'default',
  refType: 'bookmark',
  pullTarget: '@',
  /** The Python that has the `mercurial` module (runs the hgweb CGI). */
  python: '/usr/bin/python3',
  /**
   * The mainline bookmark: a push event for it is the default ref's. As a pull request ref in a
   * repository without it, it stands for the default named branch (a merge creates it).
   */
  mainBookmark: '@',
} as const satisfies VcsConstants & Record<string, unknown>;

export const FOSSIL = {
  label: 'Fossil',
  bin: 'fossil',
  // Fossil refuses to write without a user; Triad's admin user in every repository it creates.
  env: { ...process.env, USER: 'triad', LANG: 'C.UTF-8' },
  shortId: 10,
  defaultBranch: 'trunk',
  refType: 'branch',
  /** Fossil users Triad maps authenticated HTTP callers to (REMOTE_USER). */
  reader: 'triad-reader',
  writer: 'triad-writer',
} as const satisfies VcsConstants & Record<string, unknown>;

export const CONSTANTS: Record<VcsKind, VcsConstants> = { git: GIT, hg: HG, fossil: FOSSIL };
