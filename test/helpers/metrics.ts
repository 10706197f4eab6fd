/**
 * Reading a Prometheus text exposition in tests: the samples of one metric, by labels.
 */
export type Sample = { name: string; labels: Record<string, string>; value: number };

/** Every sample of the text (comments left out). */
export function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] ?? ''] = l[2] ?? '';
    out.push({ name: m[1] ?? '', labels, value: Number(m[3]) });
  }
  return out;
}

/**
 * The value of the sample of `name` whose labels include `labels` (summed when several match);
 * undefined when none matches.
 */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const hits = samples(text).filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return hits.length === 0 ? undefined : hits.reduce((n, s) => n + s.value, 0);
}
