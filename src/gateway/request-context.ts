// Per-request facts gathered along the way, for the one log line and the request metrics at the end.

export interface RequestContext {
  requestId: string;
  startedAtMs: number;
  method: string;
  path: string;
  sessionId?: string | undefined;
  agentId?: string;
  tier?: string;
  backend?: string;
  reason?: string;
  affinityHit?: boolean;
  attempts: number;
  queueWaitMs: number;
  /** The status actually sent (set by whoever writes the response). */
  status?: number;
  errorCode?: string;
  streamError?: string;
  clientClosed?: boolean;
}
