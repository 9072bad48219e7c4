// What an engine's server has seen of its requests: the same counters for the simulated and the real engine.

/** What the server has seen, as the handle's stats() reports it. */
export interface ServerCounters {
  /** Generation requests received (chat and text completions, Messages, Responses creations). */
  requestsReceived: number;
  /** Answered in full. */
  requestsServed: number;
  /** Refused with a 4xx (validation, unknown model, context too long). */
  requestsRejected: number;
  /** Failed by an injected fault (5xx, cut or stalled) or an internal error. */
  requestsFailed: number;
  /** Abandoned by the client before the answer was complete. */
  requestsAborted: number;
  /** Sums of the usage blocks of served responses. */
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

/** Fresh counters, all zero (the simulated and the real engine server both start from these). */
export function zeroCounters(): ServerCounters {
  return {
    requestsReceived: 0,
    requestsServed: 0,
    requestsRejected: 0,
    requestsFailed: 0,
    requestsAborted: 0,
    promptTokens: 0,
    cachedTokens: 0,
    completionTokens: 0,
  };
}
