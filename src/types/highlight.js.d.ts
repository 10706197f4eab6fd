/**
 * The part of highlight.js the server uses. The package's own types reference the DOM library,
 * which would give the whole (Node) program browser globals; `paths` in tsconfig.json points the
 * module here instead.
 */
declare const hljs: {
  getLanguage(name: string): { aliases?: string[] } | undefined;
  listLanguages(): string[];
  highlight(code: string, options: { language: string; ignoreIllegals?: boolean }): { value: string };
};
export default hljs;
