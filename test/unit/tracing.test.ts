import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { ServerClient } from '../../agent/client.ts';
import { describe as describeSql } from '../../src/telemetry/db-spans.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { inSpan, injectTraceHeaders, traceFields, tracingOn } from '../../src/telemetry/spans.ts';
import { startTracing } from '../../src/telemetry/tracing.ts';
import { commandName } from '../../src/vcs/process/run.ts';
import { wireOperation } from '../../src/vcs/transport.ts';
import { OtlpReceiver } from '../helpers/otlp.ts';

const silent = createLogger('silent');

describe('span names', () => {
  test('a command is named by its program and subcommand, options and their values skipped', () => {
    expect(commandName('/usr/bin/git', ['-C', '/r', 'for-each-ref', '--format=%(refname)'])).toEqual({
      kind: 'git',
      operation: 'for-each-ref',
    });
    expect(commandName('hg', ['-R', '/r', '--config', 'ui.x=1', 'log', '-r', 'tip'])).toEqual({
      kind: 'hg',
      operation: 'log',
    });
    expect(commandName('fossil', ['--version'])).toEqual({ kind: 'fossil', operation: 'run' });
  });

  test('a backend run is named by what the wire request asks for', () => {
    expect(wireOperation('/git-receive-pack', '')).toBe('git-receive-pack');
    expect(wireOperation('/info/refs', 'service=git-upload-pack')).toBe('git-upload-pack');
    expect(wireOperation('', 'cmd=unbundle')).toBe('unbundle');
    expect(wireOperation('', '')).toBe('xfer');
    // a parameter a client adds to a Mercurial request does not name the span
    expect(wireOperation('', 'cmd=capabilities&service=chosen-by-client')).toBe('capabilities');
  });

  test('a statement is named by its operation and first table', () => {
    expect(describeSql('select state from repo_ref_states where repo_id = ?')).toEqual({
      operation: 'SELECT',
      target: 'repo_ref_states',
    });
    expect(describeSql('insert into "outbox_events" (a) values (?)')).toEqual({
      operation: 'INSERT',
      target: 'outbox_events',
    });
    expect(describeSql('select pg_advisory_xact_lock(?, ?)')).toEqual({
      operation: 'SELECT',
      target: undefined,
    });
  });
});

describe('with tracing started', () => {
  let rx: OtlpReceiver;
  let peer: http.Server;
  const seen: http.IncomingHttpHeaders[] = [];
  beforeAll(async () => {
    rx = await OtlpReceiver.start();
    peer = http.createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"pipeline_status":"running"}');
    });
    await new Promise<void>((r) => peer.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    peer.close();
    await rx.close();
  });

  test('when a span is active, then log lines and outgoing calls carry its ids, and none do once tracing stopped', async () => {
    expect(tracingOn()).toBe(false);
    expect(injectTraceHeaders({})).toEqual({});
    const tracing = await startTracing(rx.endpoint, 'triad-unit', silent);
    expect(tracingOn()).toBe(true);
    const logged: Record<string, unknown>[] = [];
    const log = createLogger('info', {
      format: 'json',
      output: { write: (t: string) => logged.push(JSON.parse(t) as Record<string, unknown>) },
    });
    const api = new ServerClient(`http://127.0.0.1:${(peer.address() as AddressInfo).port}`, 't', 'i', 'n');
    const ids = await inSpan('ci.step build', {}, async (span) => {
      log.info('inside');
      await api.stepStatus(7, { status: 'running' });
      return span.spanContext();
    });
    log.info('outside');
    await api.stepStatus(7, { status: 'success' });
    await tracing!.shutdown();

    expect(logged.map((l) => [l.msg, l.trace_id, l.span_id])).toEqual([
      ['inside', ids.traceId, ids.spanId],
      ['outside', undefined, undefined],
    ]);
    expect(seen.map((h) => h.traceparent)).toEqual([`00-${ids.traceId}-${ids.spanId}-01`, undefined]);
    expect(rx.spans).toEqual([
      expect.objectContaining({ name: 'ci.step build', traceId: ids.traceId, service: 'triad-unit' }),
    ]);

    // off again: nothing is injected or logged, and tracing can start anew in this process
    expect(tracingOn()).toBe(false);
    expect(traceFields()).toEqual({});
    const again = await startTracing(rx.endpoint, 'triad-unit', silent);
    const second = await inSpan('again', {}, (span) => Promise.resolve(span.spanContext().traceId));
    await again!.shutdown();
    expect(rx.spans.map((s) => [s.name, s.traceId])).toEqual([
      ['ci.step build', ids.traceId],
      ['again', second],
    ]);
  });
});
