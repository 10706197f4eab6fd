/**
 * Kubernetes resource quantities (`500m`, `2`, `512Mi`, `1.5Gi`, `1e3`) as numbers, for the
 * per-step `resources` of the pipeline file and the pool's maximum the agent checks them
 * against. Pure; shared by the server (validation) and the agent (comparison).
 */

/** Each suffix as a power of ten and a power of two. */
const SUFFIX: Record<string, [number, number]> = {
  '': [0, 0],
  n: [-9, 0],
  u: [-6, 0],
  m: [-3, 0],
  k: [3, 0],
  M: [6, 0],
  G: [9, 0],
  T: [12, 0],
  P: [15, 0],
  E: [18, 0],
  Ki: [0, 10],
  Mi: [0, 20],
  Gi: [0, 30],
  Ti: [0, 40],
  Pi: [0, 50],
  Ei: [0, 60],
};

const QUANTITY = /^(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d{1,2})|(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$/;

/**
 * A (non-negative) quantity in billionths, exactly (`1.1` and `1100m` are equal; Kubernetes rounds
 * finer values up, so does this); undefined when the text is not a quantity.
 */
export function quantityNanos(text: string): bigint | undefined {
  const m = text.length > 64 ? null : QUANTITY.exec(text);
  if (m === null) return undefined;
  const whole = m[1] ?? '';
  const frac = m[2] ?? '';
  if (whole === '' && frac === '') return undefined;
  const [ten, two] = m[3] !== undefined ? [Number(m[3]), 0] : SUFFIX[m[4] ?? '']!;
  const digits = BigInt(`${whole}${frac}` || '0') * 2n ** BigInt(two);
  const shift = 9 + ten - frac.length;
  if (shift >= 0) return digits * 10n ** BigInt(shift);
  const d = 10n ** BigInt(-shift);
  return (digits + d - 1n) / d;
}

/** The value of a quantity, e.g. `500m` → 0.5, `1Ki` → 1024; undefined if it is not one. */
export function parseQuantity(text: string): number | undefined {
  const n = quantityNanos(text);
  return n === undefined ? undefined : Number(n) / 1e9;
}

/** The resources a step may ask for (requests and limits alike): Kubernetes quantities. */
export type StepResources = { cpu?: string | undefined; memory?: string | undefined };
export const RESOURCE_KEYS = ['cpu', 'memory'] as const;

/**
 * Why a quantity is not acceptable for `key` (undefined when it is): CPU in steps of at least
 * one millicore (`100m`, `0.5`, `2`), memory in whole bytes (`512Mi`, `2Gi`, `1G`).
 */
export function quantityProblem(key: 'cpu' | 'memory', text: string): string | undefined {
  const n = quantityNanos(text);
  const example = key === 'cpu' ? 'such as 500m or 2' : 'such as 512Mi or 2Gi';
  if (n === undefined) return `must be a Kubernetes quantity ${example}`;
  if (key === 'cpu' && n < 1_000_000n) return 'must be at least 1m (one thousandth of a CPU)';
  if (key === 'memory' && (n < 1_000_000_000n || n % 1_000_000_000n !== 0n))
    return `must be a whole number of bytes ${example}`;
  return undefined;
}

/**
 * The first resource of `asked` above `max` (keys `max` leaves unset are unbounded), as a
 * sentence naming both values, e.g. `step build asks for memory 8Gi, above this pool's maximum 4Gi`;
 * undefined when the step fits.
 */
export function aboveMaximum(stepName: string, asked: StepResources, max: StepResources): string | undefined {
  for (const key of RESOURCE_KEYS) {
    const a = asked[key];
    const m = max[key];
    if (a === undefined || m === undefined) continue;
    const av = quantityNanos(a);
    const mv = quantityNanos(m);
    if (av === undefined || mv === undefined || av > mv)
      return `step ${stepName} asks for ${key} ${a}, above this pool's maximum ${m} (spec.steps.maxResources)`;
  }
  return undefined;
}

/** Bytes as the shortest exact binary quantity: 4294967296 → `4Gi`, 1000 → `1000`. */
export function bytesQuantity(bytes: number): string {
  for (const [suffix, size] of [
    ['Ti', 2 ** 40],
    ['Gi', 2 ** 30],
    ['Mi', 2 ** 20],
    ['Ki', 2 ** 10],
  ] as const)
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${suffix}`;
  return String(bytes);
}
