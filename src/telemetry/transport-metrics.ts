import type { ServerResponse } from 'node:http';
import type client from 'prom-client';
import type { Metrics } from './metrics.ts';

/** Why a clone-URL request was refused before its backend ran (`triad_transport_refusals_total`). */
export type RefusalReason = 'queue_full' | 'slot_timeout' | 'body_too_large';

/** What one request at a clone URL tells the metrics while it runs (see `TransportMetrics.watch`). */
export type TransferWatch = {
  /** The spooled request body's size. */
  received(bytes: number): void;
  /** The request changes the repository: it runs under the push lock (`op="push"`). */
  push(): void;
};

const DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * The metrics of the clone URLs and the push lock: transfers per kind and operation (count by
 * result, duration, bytes), the transports' queue and refusals, the push-lock wait and timeouts.
 * Labels are the VCS kind, the operation and a result or reason, never a repository.
 */
export class TransportMetrics {
  private readonly transfers: client.Counter<'kind' | 'op' | 'result'>;
  private readonly duration: client.Histogram<'kind' | 'op'>;
  private readonly receivedBytes: client.Counter<'kind' | 'op'>;
  private readonly sentBytes: client.Counter<'kind' | 'op'>;
  private readonly refusals: client.Counter<'reason'>;
  private readonly lockWait: client.Histogram<'kind'>;
  private readonly lockTimeouts: client.Counter<'kind'>;
  private readonly metrics: Metrics;

  constructor(metrics: Metrics) {
    this.metrics = metrics;
    this.transfers = metrics.counter(
      'triad_vcs_transfers_total',
      'Requests at clone URLs by VCS kind, operation (push: changes the repository; fetch: the rest) and result',
      ['kind', 'op', 'result'],
    );
    this.duration = metrics.histogram(
      'triad_vcs_transfer_duration_seconds',
      'Requests at clone URLs from arrival to the last byte of the answer (queue and push-lock waits included)',
      ['kind', 'op'],
      DURATION_BUCKETS,
    );
    this.receivedBytes = metrics.counter(
      'triad_vcs_transfer_received_bytes_total',
      'Request body bytes received at clone URLs',
      ['kind', 'op'],
    );
    this.sentBytes = metrics.counter(
      'triad_vcs_transfer_sent_bytes_total',
      'Response bytes (headers included) sent from clone URLs',
      ['kind', 'op'],
    );
    this.refusals = metrics.counter(
      'triad_transport_refusals_total',
      'Clone-URL requests and source archives refused before their backend ran, by reason',
      ['reason'],
    );
    this.lockWait = metrics.histogram(
      'triad_push_lock_wait_seconds',
      "Time a change (push, merge, tag) waited for its repository's push lock, by VCS kind",
      ['kind'],
      WAIT_BUCKETS,
    );
    this.lockTimeouts = metrics.counter(
      'triad_push_lock_timeouts_total',
      'Changes that gave up waiting for the push lock (the transfer deadline passed), by VCS kind',
      ['kind'],
    );
  }

  /** The queue gauges of the transports' shared concurrency cap. */
  observeQueue(load: () => { active: number; waiting: number }): void {
    this.metrics.gauge(
      'triad_transport_queued_requests',
      'Clone-URL requests and source archives waiting for a backend slot on this replica',
      () => load().waiting,
    );
    this.metrics.gauge(
      'triad_transport_running_requests',
      'Clone-URL requests and source archives holding a backend slot on this replica',
      () => load().active,
    );
  }

  refused(reason: RefusalReason): void {
    this.refusals.inc({ reason });
  }

  lockWaited(kind: string, seconds: number): void {
    this.lockWait.observe({ kind }, seconds);
  }

  lockTimedOut(kind: string): void {
    this.lockTimeouts.inc({ kind });
  }

  /**
   * Follows one request at a clone URL until its response closes: then it counts it with its
   * result (from the status the client got, or `aborted` when the answer was cut), its duration
   * and its bytes.
   */
  watch(kind: string, res: ServerResponse): TransferWatch {
    const started = performance.now();
    const socket = res.socket;
    const written = socket?.bytesWritten ?? 0;
    let op: 'push' | 'fetch' = 'fetch';
    let received = 0;
    res.once('close', () => {
      const result = resultOf(res);
      if (result === 'too_large') this.refused('body_too_large');
      this.transfers.inc({ kind, op, result });
      this.duration.observe({ kind, op }, (performance.now() - started) / 1000);
      this.receivedBytes.inc({ kind, op }, received);
      this.sentBytes.inc({ kind, op }, Math.max(0, (socket?.bytesWritten ?? written) - written));
    });
    return {
      received: (bytes) => {
        received = bytes;
      },
      push: () => {
        op = 'push';
      },
    };
  }
}

/** A transfer's result as its client saw it. */
function resultOf(res: ServerResponse): string {
  if (!res.writableFinished) return 'aborted';
  const s = res.statusCode;
  if (s === 413) return 'too_large';
  if (s === 503) return 'busy';
  if (s === 504) return 'timeout';
  if (s >= 500) return 'failed';
  if (s >= 400) return 'rejected';
  return 'ok';
}
