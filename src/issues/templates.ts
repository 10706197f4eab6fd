import { parseDocument } from 'yaml';
import { ApiError } from '../http/errors.ts';
import type { RepoTarget } from '../domain/repo.ts';
import type { ContentsService } from '../repos/contents-service.ts';
import type { ReposService } from '../repos/service.ts';
import type { TreeEntry } from '../vcs/reader.ts';

/**
 * Issue templates (web interface only), read from the repository's default branch:
 * `.triad/ISSUE_TEMPLATE/` when it holds any template, else `.github/ISSUE_TEMPLATE/`. A template
 * is a markdown file (`.md`, `.markdown`) that starts with YAML front matter between `---` lines
 * (`name` required; `about`, `title`, `labels`, `assignees` optional; `labels` and `assignees` a
 * list or a comma-separated text) and whose rest is the body the new issue starts with. The
 * directory's `config.yml` (or `config.yaml`) with `blank_issues_enabled: false` takes away the
 * blank issue: an issue is then made from one of the templates. A template or configuration that
 * cannot be read is skipped and listed in `problems` (the pages show them to the organization's
 * members); a repository without templates allows blank issues whatever its configuration says.
 */

export const TEMPLATE_DIRS = ['.triad/ISSUE_TEMPLATE', '.github/ISSUE_TEMPLATE'] as const;
/** Template files read at most (in name order); the rest are listed as a problem. */
export const MAX_TEMPLATES = 50;
/** Template files larger than this are not read (a body's cap is 100,000 characters). */
export const TEMPLATE_MAX_BYTES = 512 * 1024;
/** The issue body's own cap (the API's). */
const BODY_MAX = 100_000;
const TEXT_MAX = { name: 200, about: 1000, title: 1000 } as const;
const LIST_MAX = 100;

export type IssueTemplate = {
  /** The file's name in its directory: how the pages name the template (`?template=`). */
  file: string;
  name: string;
  about: string;
  title: string;
  labels: string[];
  assignees: string[];
  body: string;
};
export type TemplateProblem = { file: string; reason: string };
export type TemplateSet = {
  /** The directory the templates came from; undefined when the repository has none. */
  dir: string | undefined;
  templates: IssueTemplate[];
  problems: TemplateProblem[];
  /** Whether an issue may be opened without a template. */
  blankIssues: boolean;
};

export const NO_TEMPLATES: TemplateSet = { dir: undefined, templates: [], problems: [], blankIssues: true };

const isTemplateFile = (name: string) => /\.(md|markdown)$/i.test(name);
const isConfigFile = (name: string) => /^config\.ya?ml$/i.test(name);

/** YAML text to a value, or the reason it is not YAML (aliases bounded: no expansion bombs). */
function yamlValue(text: string): { value: unknown } | { problem: string } {
  try {
    const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
    const err = doc.errors[0];
    if (err !== undefined) return { problem: `not valid YAML: ${err.message.split('\n')[0]}` };
    return { value: doc.toJS({ maxAliasCount: 50 }) as unknown };
  } catch (e) {
    return { problem: `not valid YAML: ${(e as Error).message.split('\n')[0]}` };
  }
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An optional text key: '' when absent, undefined when it is not text or is too long. */
function text(m: Record<string, unknown>, key: keyof typeof TEXT_MAX): string | undefined {
  const v = m[key];
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string' && typeof v !== 'number') return undefined;
  // (a title keeps its spaces: "[bug] " leaves the cursor after the prefix)
  const s = key === 'title' ? String(v) : String(v).trim();
  return s.length > TEXT_MAX[key] ? undefined : s;
}

/** `labels`/`assignees`: a list of names or one comma-separated text; repeats dropped. */
function names(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return [];
  const items = typeof v === 'string' ? v.split(',') : Array.isArray(v) ? v : undefined;
  if (items === undefined || !items.every((x) => typeof x === 'string' || typeof x === 'number')) {
    return undefined;
  }
  const out: string[] = [];
  for (const item of items) {
    const n = String(item).trim().replace(/^@/, '');
    if (n !== '' && !out.some((o) => o.toLowerCase() === n.toLowerCase())) out.push(n);
  }
  return out.length > LIST_MAX ? undefined : out;
}

/** One template file: the template, or why it is skipped. */
export function parseTemplate(file: string, source: string): IssueTemplate | { problem: string } {
  const src = source.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
  const m = /^---[ \t]*\n([\s\S]*?)\n?(?:---|\.\.\.)[ \t]*(?:\n|$)/.exec(src);
  if (m === null) return { problem: 'no front matter: the file must start with a --- line' };
  const parsed = yamlValue(m[1] ?? '');
  if ('problem' in parsed) return parsed;
  const fm = parsed.value;
  if (!isMap(fm)) return { problem: 'the front matter is not a set of keys' };
  const name = text(fm, 'name');
  if (name === undefined || name === '') {
    return { problem: `"name" is required (text of at most ${TEXT_MAX.name} characters)` };
  }
  const about = text(fm, 'about');
  if (about === undefined) return { problem: `"about" must be text of at most ${TEXT_MAX.about} characters` };
  const title = text(fm, 'title');
  if (title === undefined) return { problem: `"title" must be text of at most ${TEXT_MAX.title} characters` };
  const labels = names(fm.labels);
  if (labels === undefined) return { problem: `"labels" must be a list of at most ${LIST_MAX} names` };
  const assignees = names(fm.assignees);
  if (assignees === undefined) return { problem: `"assignees" must be a list of at most ${LIST_MAX} names` };
  const body = src.slice(m[0].length).replace(/^\n+/, '');
  if (body.length > BODY_MAX) return { problem: `the body is longer than ${BODY_MAX} characters` };
  return { file, name, about, title, labels, assignees, body };
}

/** A `config.yml`: whether blank issues are allowed (`blank_issues_enabled`, default true). */
export function parseTemplateConfig(source: string): { blankIssues: boolean } | { problem: string } {
  if (source.trim() === '') return { blankIssues: true };
  const parsed = yamlValue(source.replace(/^\uFEFF/, ''));
  if ('problem' in parsed) return parsed;
  const v = parsed.value;
  if (!isMap(v)) return { problem: 'the configuration is not a set of keys' };
  const blank = v.blank_issues_enabled;
  if (blank === undefined || blank === null) return { blankIssues: true };
  if (typeof blank !== 'boolean') return { problem: '"blank_issues_enabled" must be true or false' };
  return { blankIssues: blank };
}

/**
 * The template chosen for a new issue (`file` as the form sent it; '' or undefined for none):
 * 404 when it names no template, 422 when there is none and blank issues are off.
 */
export function chosenTemplate(set: TemplateSet, file: string | undefined): IssueTemplate | undefined {
  if (file !== undefined && file !== '') {
    const t = set.templates.find((x) => x.file === file);
    if (t === undefined) throw ApiError.notFound(`issue template "${file}"`);
    return t;
  }
  if (!set.blankIssues) {
    throw new ApiError(
      422,
      'unprocessable',
      'This repository opens issues from its templates only: choose one.',
    );
  }
  return undefined;
}

type Contents = Pick<ContentsService, 'commit' | 'tree' | 'blob'>;

/** Reads a repository's templates through the contents service (any kind: git, hg, fossil). */
export class IssueTemplates {
  private readonly repos: Pick<ReposService, 'handle'>;
  private readonly contents: Contents;

  constructor(deps: { repos: Pick<ReposService, 'handle'>; contents: Contents }) {
    this.repos = deps.repos;
    this.contents = deps.contents;
  }

  /** The templates at the head of the default branch (none for an empty repository). */
  async read(t: RepoTarget): Promise<TemplateSet> {
    const { defaultBranch } = await this.repos.handle(t);
    const commit = await absent(() => this.contents.commit(t, defaultBranch));
    if (commit === undefined) return NO_TEMPLATES;
    for (const dir of TEMPLATE_DIRS) {
      const entries = (await absent(() => this.contents.tree(t, dir, commit))) ?? [];
      const files = entries.filter((e) => !e.is_dir);
      const templateFiles = files
        .filter((e) => isTemplateFile(e.name))
        .sort((a, b) => (a.name < b.name ? -1 : 1));
      if (templateFiles.length === 0) continue;
      return this.readDir(
        t,
        commit,
        dir,
        templateFiles,
        files.find((e) => isConfigFile(e.name)),
      );
    }
    return NO_TEMPLATES;
  }

  private async readDir(
    t: RepoTarget,
    commit: string,
    dir: string,
    templateFiles: TreeEntry[],
    configFile: TreeEntry | undefined,
  ): Promise<TemplateSet> {
    const problems: TemplateProblem[] = [];
    const read = async (file: TreeEntry): Promise<string | undefined> => {
      const problem = (reason: string) => void problems.push({ file: file.name, reason });
      if (file.size > TEMPLATE_MAX_BYTES)
        return problem(`it is larger than ${TEMPLATE_MAX_BYTES / 1024} KiB`);
      const blob = await absent(() => this.contents.blob(t, `${dir}/${file.name}`, commit));
      if (blob === undefined) return problem('it could not be read');
      if (blob.encoding !== 'utf-8') return problem('it is not text');
      if (blob.truncated) return problem('it is too large');
      return blob.content;
    };
    const templates: IssueTemplate[] = [];
    for (const file of templateFiles.slice(0, MAX_TEMPLATES)) {
      const source = await read(file);
      if (source === undefined) continue;
      const parsed = parseTemplate(file.name, source);
      if ('problem' in parsed) problems.push({ file: file.name, reason: parsed.problem });
      else templates.push(parsed);
    }
    if (templateFiles.length > MAX_TEMPLATES) {
      const more = templateFiles.length - MAX_TEMPLATES;
      problems.push({
        file: templateFiles[MAX_TEMPLATES]!.name,
        reason: `only ${MAX_TEMPLATES} templates are read (${more} more left out)`,
      });
    }
    let blankIssues = true;
    const config = configFile === undefined ? undefined : await read(configFile);
    if (configFile !== undefined && config !== undefined) {
      const c = parseTemplateConfig(config);
      if ('problem' in c) problems.push({ file: configFile.name, reason: c.problem });
      else blankIssues = c.blankIssues;
    }
    // (without a template to choose, an issue can only be blank)
    return { dir, templates, problems, blankIssues: blankIssues || templates.length === 0 };
  }
}

/** The value of a read, or undefined when the repository has no such thing (a 404). */
async function absent<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}
