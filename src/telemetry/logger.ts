import { pino, type DestinationStream, type Logger } from 'pino';
import { traceFields } from './spans.ts';

export type { Logger };

/** `json` always, `pretty` always, or `auto`: pretty when the output is a terminal, JSON otherwise. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Where log lines go: stdout unless a test gives another stream (with `isTTY` as a terminal's). */
export type LogOutput = { write(text: string): unknown; isTTY?: boolean };

export type LoggerOptions = { service?: string; format?: LogFormat; output?: LogOutput };

/**
 * The process's logger: one JSON object a line (for containers, collectors and tests), or, when
 * the output is a terminal (`LOG_FORMAT=auto`, the default) or `LOG_FORMAT=pretty`, a line a
 * person reads: `12:04:05.123 INFO  Triad listening on … port=3000`. With tracing on, a line
 * written while a span is active carries `trace_id` and `span_id`.
 */
export function createLogger(level: string, opts: LoggerOptions = {}): Logger {
  const output = opts.output ?? process.stdout;
  const format = opts.format ?? 'auto';
  const pretty = format === 'pretty' || (format === 'auto' && output.isTTY === true);
  const options = {
    level,
    base: { service: opts.service ?? 'triad' },
    timestamp: pino.stdTimeFunctions.isoTime,
    // a line written while a span is active names its trace (`trace_id`, `span_id`; spans.ts)
    mixin: traceFields,
  };
  if (!pretty) return opts.output === undefined ? pino(options) : pino(options, output as DestinationStream);
  const color = output.isTTY === true && process.env.NO_COLOR === undefined;
  return pino(options, { write: (line: string) => output.write(prettyLine(line, color)) });
}

const LEVELS: Record<number, [string, string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '36'],
  30: ['INFO ', '32'],
  40: ['WARN ', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};
/** Fields every line has or that the line's head shows already. */
const HEAD = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname', 'err']);

/** One JSON log line as `time LEVEL message key=value …`, an error's stack on the lines below. */
export function prettyLine(json: string, color = false): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const paint = (code: string, text: string) => (color ? `\u001b[${code}m${text}\u001b[0m` : text);
  const [name, code] = LEVELS[Number(o.level)] ?? [String(o.level), '0'];
  const time = typeof o.time === 'string' ? o.time.slice(11, 23) : '';
  const fields = Object.entries(o)
    .filter(([k, v]) => !HEAD.has(k) && v !== undefined)
    .map(([k, v]) => `${paint('2', `${k}=`)}${fieldText(v)}`);
  const head = [
    paint('2', time),
    paint(code, name),
    typeof o.msg === 'string' ? o.msg : '',
    ...fields,
  ].filter((p) => p !== '');
  const err = o.err as { type?: string; message?: string; stack?: string } | undefined;
  const stack =
    err === undefined
      ? ''
      : `\n    ${(err.stack ?? `${err.type}: ${err.message}`).split('\n').join('\n    ')}`;
  return `${head.join(' ')}${stack}\n`;
}

function fieldText(v: unknown): string {
  if (typeof v === 'string') return v !== '' && !/[\s"=]/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

/** A URL as the logs keep it: a one-time password link's secret (`token=`) left out. */
export function redactSecrets(url: string): string {
  return url.replace(/([?&]token=)[^&#]*/gi, '$1[redacted]');
}
