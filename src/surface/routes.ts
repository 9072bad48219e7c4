// The routes an engine serves, with the methods each takes: vLLM's info routes, its OpenAI-compatible API and its
// Anthropic endpoint. The simulator and the real engine build their tables from these groups (and add their own).

/** A path and the methods it takes (another method is a 405, another path a 404). */
export type Route = readonly [path: string, methods: readonly string[]];

/** Liveness, version, metrics and the model list. */
export const INFO_ROUTES: readonly Route[] = [
  ["/health", ["GET"]],
  ["/ping", ["GET", "POST"]],
  ["/version", ["GET"]],
  ["/metrics", ["GET"]],
  ["/v1/models", ["GET"]],
];

/** Chat and text completions. */
export const OPENAI_ROUTES: readonly Route[] = [
  ["/v1/chat/completions", ["POST"]],
  ["/v1/completions", ["POST"]],
];

/** The Anthropic Messages API and its token count. */
export const ANTHROPIC_ROUTES: readonly Route[] = [
  ["/v1/messages", ["POST"]],
  ["/v1/messages/count_tokens", ["POST"]],
];

/** One lookup table of the groups given. */
export function routeTable(...groups: readonly (readonly Route[])[]): ReadonlyMap<string, readonly string[]> {
  return new Map(groups.flat());
}
