/**
 * A PostgreSQL array literal for a `?::text[]` parameter. MikroORM expands a JS array
 * parameter into a list (`?, ?`), so arrays travel as one literal string instead.
 */
export function textArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}
