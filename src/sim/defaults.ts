// Every default of the simulated engine in one block, so the code, the CLI help and docs/simulator.md agree.

export const SIM_DEFAULTS = {
  /** In-process engines bind loopback only unless told otherwise. */
  host: "127.0.0.1",
  /** In-process engines take an OS-assigned port, so parallel tests never collide. */
  port: 0,
  /** The `agent-serve sim` command's port: not the gateway's 8000 nor the demo engines' 8001-8003. */
  cliPort: 8100,
  profile: "instant",
  /** Simulated milliseconds per wall-clock millisecond. */
  timeScale: 1,
  seed: 0,
  /** vLLM's default paged-attention block size. */
  blockSizeTokens: 16,
  /** The tokenizer approximation: one token per this many UTF-16 code units of text. */
  charsPerToken: 4,
  /** Upper bound on a request body; far above any context the profiles accept. */
  maxRequestBodyBytes: 64 * 1024 * 1024,
  /** Longer than undici's and most proxies' idle timeouts, so the client side closes idle sockets first. */
  keepAliveTimeoutMs: 65_000,
  headersTimeoutMs: 66_000,
  /** Status of an injected `error_rate` failure when the fault names none. */
  injectedErrorStatus: 500,
  /** vLLM labels its metrics per engine core; a simulated server has exactly one. */
  engineLabel: "0",
  /** Finished Responses kept for previous_response_id and GET (least recently used dropped first). */
  responseStoreCapacity: 10_000,
  /** What `/version` reports. */
  version: "0.0.0-agent-serve-sim",
} as const;
