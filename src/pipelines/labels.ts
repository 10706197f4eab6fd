import { z } from 'zod';

/**
 * Pool labels: a pipeline file's top-level `labels` map and the labels an agent polls with. An
 * agent claims a pipeline whose labels are exactly its own (no labels on both sides included),
 * so every pipeline belongs to one label set and each pool scales on its own work.
 *
 * Keys and values follow Kubernetes label syntax (a pool's labels are often its node labels):
 * keys are an optional DNS prefix and `/` then a name of up to 63 letters, digits, `-`, `_`, `.`
 * starting and ending with a letter or digit; values are such a name or empty. At most 16.
 */
export type Labels = Record<string, string>;
export const MAX_LABELS = 16;

const NAME = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;
const PREFIX = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

export function validLabelKey(key: string): boolean {
  const slash = key.lastIndexOf('/');
  if (slash === -1) return NAME.test(key);
  const prefix = key.slice(0, slash);
  return prefix.length <= 253 && PREFIX.test(prefix) && NAME.test(key.slice(slash + 1));
}

export function validLabelValue(value: string): boolean {
  return value === '' || NAME.test(value);
}

const KEY_RULE =
  'a label key is a name of up to 63 letters, digits, "-", "_" or "." (optionally prefix/name)';
const VALUE_RULE = 'a label value is empty or a name of up to 63 letters, digits, "-", "_" or "."';

/** The pipeline file's `labels`: a map of label keys to values (numbers and booleans as text). */
export const labelsSchema = z
  .record(
    z.string(),
    z.union([z.string(), z.number(), z.boolean()]).transform(String).refine(validLabelValue, VALUE_RULE),
  )
  .superRefine((m, ctx) => {
    const keys = Object.keys(m);
    if (keys.length > MAX_LABELS) ctx.addIssue({ code: 'custom', message: `at most ${MAX_LABELS} labels` });
    for (const k of keys.filter((x) => !validLabelKey(x))) {
      ctx.addIssue({ code: 'custom', path: [k], message: KEY_RULE });
    }
  });

/**
 * `k=v,k2=v2` (the `labels` query parameter) as a map; empty text is no labels. Throws an Error
 * naming the problem for a malformed pair, an invalid key or value, or a repeated key.
 */
export function parseLabelQuery(text: string): Labels {
  const out: Labels = {};
  if (text.trim() === '') return out;
  const pairs = text.split(',');
  if (pairs.length > MAX_LABELS) throw new Error(`at most ${MAX_LABELS} labels`);
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq === -1) throw new Error(`"${pair}" is not key=value`);
    const key = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    if (!validLabelKey(key)) throw new Error(`"${key}": ${KEY_RULE}`);
    if (!validLabelValue(value)) throw new Error(`"${value}": ${VALUE_RULE}`);
    if (Object.hasOwn(out, key)) throw new Error(`label "${key}" is given twice`);
    out[key] = value;
  }
  return out;
}

/** A label map as `k=v,...` with sorted keys (the query form; empty for none). */
export function formatLabels(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',');
}

/** The `labels` query parameter as a zod field: optional text, parsed into a map (400 when malformed). */
export const labelsQueryParam = z
  .string()
  .max(4096)
  .transform((v, ctx) => {
    try {
      return parseLabelQuery(v);
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: e instanceof Error ? e.message : 'invalid labels' });
      return z.NEVER;
    }
  })
  .optional()
  .meta({ description: 'the label set, `key=value` pairs separated by commas (none: no labels)' });
