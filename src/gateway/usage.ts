// Token usage as engines report it (OpenAI's and Anthropic's `usage`), read without parsing whole response bodies.

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

/** Chat and completions name the fields prompt/completion; the Responses API names them input/output. */
interface RawUsage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
  input_tokens?: unknown;
  output_tokens?: unknown;
  input_tokens_details?: { cached_tokens?: unknown } | null;
  /** Anthropic Messages: input_tokens are the prompt tokens NOT read from or written to the cache. */
  cache_read_input_tokens?: unknown;
  cache_creation_input_tokens?: unknown;
}

const USAGE_KEY = Buffer.from('"usage"');

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : 0;
}

export function usageFrom(raw: unknown): TokenUsage | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const usage = raw as RawUsage;
  if (usage.cache_read_input_tokens !== undefined || usage.cache_creation_input_tokens !== undefined) {
    // Anthropic's split: the whole prompt is the uncached, the read and the written parts together.
    const read = count(usage.cache_read_input_tokens);
    return {
      promptTokens: count(usage.input_tokens) + read + count(usage.cache_creation_input_tokens),
      completionTokens: count(usage.output_tokens),
      cachedTokens: read,
    };
  }
  return {
    promptTokens: count(usage.prompt_tokens ?? usage.input_tokens),
    completionTokens: count(usage.completion_tokens ?? usage.output_tokens),
    cachedTokens: count(
      usage.prompt_tokens_details?.cached_tokens ?? usage.input_tokens_details?.cached_tokens,
    ),
  };
}

/**
 * The `usage` object of a JSON response body: the last `"usage"` key, then its balanced braces, parsed on
 * their own (a few hundred bytes instead of the whole answer). Undefined when absent or malformed.
 */
export function extractUsage(body: Buffer): TokenUsage | undefined {
  const key = body.lastIndexOf(USAGE_KEY);
  if (key < 0) return undefined;
  const start = body.indexOf(0x7b /* { */, key + USAGE_KEY.length);
  if (start < 0) return undefined;
  let depth = 0;
  let inString = false;
  for (let i = start; i < body.length; i++) {
    const byte = body[i]!;
    if (inString) {
      if (byte === 0x5c /* \ */) i++;
      else if (byte === 0x22 /* " */) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x7b) {
      depth++;
    } else if (byte === 0x7d /* } */ && --depth === 0) {
      try {
        return usageFrom(JSON.parse(body.toString("utf8", start, i + 1)));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}
