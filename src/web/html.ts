/**
 * HTML built with an escape-by-default tagged template: every value put into `html`...``` is
 * escaped unless it is itself `Html` (made by `html`, or by `trusted` for markup a renderer made
 * safe: markdown-it's output, highlight.js's). Arrays are rendered item by item; `null`,
 * `undefined` and `false` render nothing, so `${cond && html`...`}` works.
 */
export class Html {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

export type Renderable = Html | string | number | bigint | boolean | null | undefined | readonly Renderable[];

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text made safe for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function render(v: Renderable): string {
  if (v instanceof Html) return v.text;
  if (v === null || v === undefined || v === false || v === true) return '';
  if (Array.isArray(v)) {
    let out = '';
    for (const item of v as readonly Renderable[]) out += render(item);
    return out;
  }
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: Renderable[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(out);
}

/** Markup produced by a renderer that escapes on its own (markdown-it with html off, highlight.js). */
export function trusted(markup: string): Html {
  return new Html(markup);
}

/** Joins renderables with a separator (itself escaped unless `Html`). */
export function join(items: readonly Renderable[], sep: Renderable): Html {
  const parts: string[] = items.map(render);
  return new Html(parts.join(render(sep)));
}
