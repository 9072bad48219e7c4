// What an engine's server has seen of its requests: the same counters for the simulated and the real engine.

/** What the server has seen, as the handle's stats() reports it. */
export interface ServerCounters {
  requestsReceived: number;
  requestsServed: number;
  requestsRejected: number;
  requestsFailed: number;
  requestsAborted: number;
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
