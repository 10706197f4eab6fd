/**
 * A small Dockerfile reader for the image tests (no Docker here): parser directives, comments,
 * line continuations, instructions with their arguments, build stages, and `ARG` substitution in
 * `FROM`. Enough for the checks in test/unit/dockerfiles.test.ts; not a complete implementation
 * of the Dockerfile grammar (heredocs, escape directives other than `\` are refused).
 */
export type Instruction = {
  keyword: string;
  /** The arguments after the keyword, continuation lines joined with a space. */
  args: string;
  /** 1-based line of the keyword. */
  line: number;
  /** The comment lines right above the instruction (without `#`). */
  comments: string[];
};

export type Stage = { base: string; name: string | undefined; instructions: Instruction[] };

export type Dockerfile = {
  directives: Record<string, string>;
  /** Instructions before the first FROM (ARGs usable in FROM). */
  preamble: Instruction[];
  stages: Stage[];
  /** Every comment line of the file. */
  comments: string[];
};

export function parseDockerfile(text: string): Dockerfile {
  const lines = text.split('\n');
  const directives: Record<string, string> = {};
  const comments: string[] = [];
  const all: Instruction[] = [];
  let pending: string[] = [];
  let inDirectives = true;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    if (trimmed.startsWith('#')) {
      const directive = /^#\s*([a-z]+)\s*=\s*(\S+)\s*$/i.exec(trimmed);
      if (inDirectives && directive !== null) {
        directives[directive[1]!.toLowerCase()] = directive[2]!;
        continue;
      }
      inDirectives = false;
      const comment = trimmed.replace(/^#\s?/, '');
      comments.push(comment);
      pending.push(comment);
      continue;
    }
    inDirectives = false;
    if (trimmed === '') {
      pending = [];
      continue;
    }
    const start = i;
    let joined = trimmed;
    while (joined.endsWith('\\')) {
      joined = joined.slice(0, -1).trimEnd();
      i++;
      if (i >= lines.length) throw new Error(`line ${start + 1}: continuation at the end of the file`);
      const next = lines[i]!.trim();
      if (next.startsWith('#')) continue; // comments inside a continued instruction are dropped
      joined += ` ${next}`;
    }
    const m = /^([A-Za-z]+)\s+([\s\S]*)$/.exec(joined);
    if (m === null) throw new Error(`line ${start + 1}: not an instruction: ${joined}`);
    if (/<<-?["']?[A-Z]/.test(m[2]!)) throw new Error(`line ${start + 1}: heredocs are not supported`);
    all.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start + 1, comments: pending });
    pending = [];
  }
  if ((directives.escape ?? '\\') !== '\\') throw new Error('only the default escape character is supported');

  const preamble: Instruction[] = [];
  const stages: Stage[] = [];
  const globalArgs = new Map<string, string>();
  for (const ins of all) {
    if (ins.keyword === 'FROM') {
      const words = ins.args.split(/\s+/).filter((w) => !w.startsWith('--'));
      const base = words[0]!.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string, b: string) => {
        const v = globalArgs.get(a ?? b);
        if (v === undefined)
          throw new Error(`line ${ins.line}: FROM uses ARG ${a ?? b}, which has no default`);
        return v;
      });
      const name = words[1]?.toUpperCase() === 'AS' ? words[2] : undefined;
      stages.push({ base, name, instructions: [] });
    } else if (stages.length === 0) {
      if (ins.keyword !== 'ARG') throw new Error(`line ${ins.line}: ${ins.keyword} before the first FROM`);
      const [k, v] = ins.args.split('=', 2) as [string, string | undefined];
      if (v !== undefined) globalArgs.set(k.trim(), v.trim().replace(/^["']|["']$/g, ''));
      preamble.push(ins);
    } else {
      stages.at(-1)!.instructions.push(ins);
    }
  }
  return { directives, preamble, stages, comments };
}

/** `LABEL k=v k2="v 2"` (one or several instructions) as a map. */
export function labelsOf(stage: Stage): Map<string, string> {
  const labels = new Map<string, string>();
  for (const ins of stage.instructions.filter((x) => x.keyword === 'LABEL')) {
    for (const m of ins.args.matchAll(/([\w.-]+)=("(?:[^"\\]|\\.)*"|\S+)/g)) {
      labels.set(m[1]!, m[2]!.replace(/^"|"$/g, ''));
    }
  }
  return labels;
}

/**
 * Whether `path` is sent in the build context under a .dockerignore (`*`-style patterns, `!`
 * exceptions, the last matching line wins; `**` is not supported).
 */
export function inContext(dockerignore: string, path: string): boolean {
  let included = true;
  for (const raw of dockerignore.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negated = line.startsWith('!');
    const pattern = (negated ? line.slice(1) : line).replace(/^\/|\/$/g, '');
    const re = new RegExp(
      `^${pattern
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '[^/]*')
        .replace(/\?/g, '[^/]')}(/.*)?$`,
    );
    if (re.test(path)) included = negated;
  }
  return included;
}
