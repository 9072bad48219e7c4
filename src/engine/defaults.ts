// Every default of the real (llama.cpp) engine in one block, so the code, the CLI help and docs/real-engine.md agree.
import { availableParallelism } from "node:os";

export const ENGINE_DEFAULTS = {
  host: "127.0.0.1",
  /** In-process engines take an OS-assigned port. */
  port: 0,
  /** vLLM's default port, used by the `agent-serve engine` command. */
  cliPort: 8000,
  /** Sequences decoded together; each keeps its own prefix state. */
  slots: 4,
  /** Tokens per slot: a prompt plus max_tokens must fit. */
  ctxSize: 4096,
  /** Prompt tokens evaluated per llama.cpp batch. */
  batchSize: 512,
  /** Every core: more threads than cores stall llama.cpp's decoding. */
  threads: (): number => availableParallelism(),
  /** Completion length when the request names none (vLLM's default is the rest of the context). */
  maxTokens: 256,
  /** Completion length of a /v1/completions request that names none: vLLM's (and OpenAI's) default there. */
  completionMaxTokens: 16,
  /** Greedy unless the request sets a temperature: the same prompt always gives the same reply. */
  temperature: 0,
  maxRequestBodyBytes: 64 * 1024 * 1024,
  keepAliveTimeoutMs: 65_000,
  headersTimeoutMs: 66_000,
  version: "0.0.0-agent-serve-llama",
} as const;
