import { LineCounter, parseDocument, isMap, isNode, isScalar, type Node } from 'yaml';
import { z } from 'zod';
import { labelsSchema } from './labels.ts';
import { DEFAULT_PIPELINE_LIMITS } from './model.ts';
import { quantityProblem } from './quantity.ts';

export const PIPELINE_FILE = '.pipeline.yml';
export const PIPELINE_EVENTS = ['push', 'tag', 'pull_request'] as const;
export type PipelineEvent = (typeof PIPELINE_EVENTS)[number];

const stringList = z
  .union([z.string().min(1), z.array(z.string().min(1)).min(1)])
  .transform((v) => (typeof v === 'string' ? [v] : v));
const when = z
  .object({
    event: z
      .union([z.enum(PIPELINE_EVENTS), z.array(z.enum(PIPELINE_EVENTS)).min(1)])
      .transform((v) => (typeof v === 'string' ? [v] : v))
      .optional(),
    branch: stringList.optional(),
  })
  .strict();
export type When = z.infer<typeof when>;

/**
 * A duration such as `30m`, `90s`, `1h30m` or `2h` (units h, m, s, in that order) in seconds;
 * undefined when the text is not one. With `bareSeconds`, a plain number counts as seconds (the
 * environment's convention); the pipeline file always names its unit.
 */
export function parseDuration(text: string, bareSeconds = false): number | undefined {
  const t = text.trim();
  if (bareSeconds && /^\d{1,9}$/.test(t)) return Number(t);
  const m = /^(?:(\d{1,6})h)?(?:(\d{1,7})m)?(?:(\d{1,9})s)?$/.exec(t);
  if (m === null || t === '') return undefined;
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

/** Seconds as the shortest `1h30m`-style text. */
export function formatDuration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const text = `${h > 0 ? `${h}h` : ''}${m > 0 ? `${m}m` : ''}${s > 0 ? `${s}s` : ''}`;
  return text === '' ? '0s' : text;
}

const duration = z.union([z.string(), z.number()]).transform((v, ctx) => {
  const seconds = typeof v === 'string' ? parseDuration(v) : undefined;
  if (seconds === undefined || seconds < 1) {
    ctx.addIssue({ code: 'custom', message: 'must be a duration such as 90s, 30m or 1h30m' });
    return z.NEVER;
  }
  return seconds;
});

/** A quantity for `key` (YAML may give `cpu: 2` or `cpu: 0.5` as a number): kept as written. */
const quantity = (key: 'cpu' | 'memory') =>
  z.union([z.string(), z.number()]).transform((v, ctx) => {
    const text = String(v);
    const problem = quantityProblem(key, text);
    if (problem === undefined) return text;
    ctx.addIssue({ code: 'custom', message: problem });
    return z.NEVER;
  });
/** A step's `resources`: requests and limits of its container (the pool's maximum bounds them). */
const resources = z
  .object({ cpu: quantity('cpu').optional(), memory: quantity('memory').optional() })
  .strict();

const envValue = z.union([z.string(), z.number(), z.boolean()]).transform(String);
const step = z
  .object({
    name: z.string().min(1).max(255),
    image: z.string().min(1).max(1024),
    commands: z
      .union([z.string().min(1), z.array(z.string()).min(1)])
      .transform((v) => (typeof v === 'string' ? [v] : v)),
    environment: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a variable name'), envValue)
      .optional(),
    when: when.optional(),
    /** Seconds (from `30m` etc.); the server's TRIAD_STEP_TIMEOUT caps it. */
    timeout: duration.optional(),
    resources: resources.optional(),
  })
  .strict();

const file = z
  .object({
    when: when.optional(),
    /** Only agents polling with exactly these labels claim the pipeline (see labels.ts). */
    labels: labelsSchema.optional(),
    steps: z.array(step).min(1),
  })
  .strict()
  .superRefine((f, ctx) => {
    const seen = new Set<string>();
    f.steps.forEach((s, i) => {
      if (seen.has(s.name))
        ctx.addIssue({
          code: 'custom',
          path: ['steps', i, 'name'],
          message: `duplicate step name "${s.name}"`,
        });
      seen.add(s.name);
    });
  });

export type PipelineFile = z.infer<typeof file>;
export type ParsedStep = PipelineFile['steps'][number];

export type ParseResult = { ok: true; file: PipelineFile } | { ok: false; error: string };

/**
 * Parses `.pipeline.yml`. Errors name the line and the field, e.g.
 * `.pipeline.yml line 4 (steps[0].image): Invalid input: expected string, received undefined`.
 */
export function parsePipelineFile(text: string, limits: { maxSteps?: number } = {}): ParseResult {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const yamlError = doc.errors[0];
  if (yamlError !== undefined) {
    const at = lines.linePos(yamlError.pos[0]);
    return {
      ok: false,
      error: `${PIPELINE_FILE} line ${at.line}: ${yamlError.message.split('\n')[0] ?? 'invalid YAML'}`,
    };
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    return { ok: false, error: `${PIPELINE_FILE}: ${e instanceof Error ? e.message : 'invalid YAML'}` };
  }
  if (JSON.stringify(value ?? null).includes('\\u0000')) {
    return { ok: false, error: `${PIPELINE_FILE}: NUL characters are not allowed` };
  }
  const r = file.safeParse(value);
  const maxSteps = limits.maxSteps ?? DEFAULT_PIPELINE_LIMITS.maxSteps;
  if (r.success && r.data.steps.length > maxSteps) {
    const at = doc.getIn(['steps', maxSteps], true);
    const line = isNode(at) && at.range ? lines.linePos(at.range[0]).line : 1;
    return {
      ok: false,
      error: `${PIPELINE_FILE} line ${line} (steps): ${r.data.steps.length} steps, more than the limit of ${maxSteps}`,
    };
  }
  if (r.success) return { ok: true, file: r.data };
  // An unknown key first: it is often a misspelt one, whose absence is the other issue.
  const issue = r.error.issues.find((i) => i.code === 'unrecognized_keys') ?? r.error.issues[0]!;
  // The deepest YAML node that exists along the issue's path gives the line.
  let line = 1;
  const unknown = issue.code === 'unrecognized_keys' ? issue.keys[0] : undefined;
  const keyNode =
    unknown === undefined ? undefined : keyOf(doc.getIn(issue.path as (string | number)[], true), unknown);
  if (keyNode?.range) line = lines.linePos(keyNode.range[0]).line;
  else
    for (let n = issue.path.length; n >= 0; n--) {
      const node: unknown = doc.getIn(issue.path.slice(0, n) as (string | number)[], true);
      if (isNode(node) && node.range) {
        line = lines.linePos(node.range[0]).line;
        break;
      }
    }
  const field = issue.path.reduce<string>(
    (acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc === '' ? String(p) : `${acc}.${String(p)}`),
    '',
  );
  const message = unknown === undefined ? issue.message : unknownKey(unknown, knownKeys(issue.path));
  return {
    ok: false,
    error: `${PIPELINE_FILE} line ${line}${field === '' ? '' : ` (${field})`}: ${message}`,
  };
}

/** The key node of `key` in a YAML mapping node. */
function keyOf(map: unknown, key: string): Node | undefined {
  if (!isMap(map)) return undefined;
  const pair = map.items.find((p) => isScalar(p.key) && String(p.key.value) === key);
  return isNode(pair?.key) ? pair.key : undefined;
}

/** The keys the mapping at `path` may have: the file's, a step's or a `when` block's. */
function knownKeys(path: readonly PropertyKey[]): string[] {
  const last = path.at(-1);
  if (last === 'when') return Object.keys(when.shape);
  if (last === 'resources') return Object.keys(resources.shape);
  if (path.length === 2 && path[0] === 'steps') return Object.keys(step.shape);
  return Object.keys(file.shape);
}

/**
 * `unknown key "command" (did you mean "commands")`: the nearest known key within a third of its
 * length in edits, else one the typed key begins (`env` → `environment`), else the known keys.
 */
function unknownKey(key: string, known: string[]): string {
  const typed = key.toLowerCase();
  const nearest = known
    .map((k) => ({ k, d: editDistance(typed, k) }))
    .sort((a, b) => a.d - b.d)
    .find((c) => c.d <= Math.max(1, Math.floor(c.k.length / 3)))?.k;
  const hint = nearest ?? (typed.length >= 3 ? known.find((k) => k.startsWith(typed)) : undefined);
  return hint !== undefined
    ? `unknown key "${key}" (did you mean "${hint}")`
    : `unknown key "${key}" (known keys: ${known.join(', ')})`;
}

/** Levenshtein distance (keys are short). */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/**
 * Glob match without backtracking regexes (patterns and branch names come from pushers):
 * `*` matches within a path segment, `**` across segments, `?` one character other than `/`.
 * Dynamic programming over (pattern position, text position): O(pattern × text).
 */
export function globMatch(glob: string, text: string): boolean {
  type Tok = { kind: 'lit'; ch: string } | { kind: 'one' } | { kind: 'star' } | { kind: 'globstar' };
  const toks: Tok[] = [];
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*') {
      toks.push({ kind: 'globstar' });
      while (glob[i + 1] === '*') i++;
    } else if (c === '*') toks.push({ kind: 'star' });
    else if (c === '?') toks.push({ kind: 'one' });
    else toks.push({ kind: 'lit', ch: c });
  }
  // can[j] = pattern prefix (first i tokens) matches text prefix of length j
  let can = new Array<boolean>(text.length + 1).fill(false);
  can[0] = true;
  for (const t of toks) {
    const next = new Array<boolean>(text.length + 1).fill(false);
    for (let j = 0; j <= text.length; j++) {
      if (t.kind === 'star' || t.kind === 'globstar') {
        // zero characters, or one more character (not '/' for a single star)
        next[j] = can[j]! || (j > 0 && next[j - 1]! && (t.kind === 'globstar' || text[j - 1] !== '/'));
      } else if (j > 0 && can[j - 1]!) {
        const ch = text[j - 1]!;
        next[j] = t.kind === 'one' ? ch !== '/' : ch === t.ch;
      }
    }
    can = next;
  }
  return can[text.length]!;
}

/** Does a `when` block match? Event lists any of the pipeline's events; branch globs apply when there is a branch. */
export function whenMatches(w: When | undefined, events: readonly string[], branch: string): boolean {
  if (w === undefined) return true;
  if (w.event !== undefined && !events.some((e) => (w.event as readonly string[]).includes(e))) return false;
  if (w.branch !== undefined && branch !== '' && !w.branch.some((g) => globMatch(g, branch))) return false;
  if (w.branch !== undefined && branch === '' && !events.includes('tag')) return false;
  return true;
}
