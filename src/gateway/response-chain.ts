// The Responses API's conversations: a request with previous_response_id goes to the engine that stores it.
import type { ResponseOwnerStore } from "../affinity/response-owner-store.js";
import type { ResponseOwner } from "../affinity/response-owners.js";
import type { Backend } from "../backends/backend.js";
import type { BackendRegistry } from "../backends/registry.js";
import { GatewayError } from "../core/errors.js";
import type { CompletionRequest } from "./completion-request.js";

interface ChainDeps {
  readonly registry: BackendRegistry;
  readonly responseOwners: ResponseOwnerStore;
}

export interface Conversation {
  /** The affinity key: the client's session id, else the chain's own key, else none. */
  sessionKey: string | undefined;
  /** The engine that stores the response this request continues; only it can answer. */
  owner: Backend | undefined;
}

/**
 * Where a request's conversation lives. Chat and completions: the session header decides. A Responses request
 * with previous_response_id continues a response that one engine keeps in its memory: that engine (and the
 * chain's affinity key, so its turns count as one session) wins over the session header. The first turn of a
 * chain without a session header gets a key of its own, so a conversation chained only by response ids is
 * placed, pinned and counted like any session. With a shared owner store an id this replica never saw costs
 * one round trip (the result is then a promise).
 */
export function continuedConversation(
  deps: ChainDeps,
  request: CompletionRequest,
  sessionId: string | undefined,
  requestId: string,
  /** The chain may name the session (affinity.session_keys reached its responses_chain entry). */
  chainKeys: boolean,
): Conversation | Promise<Conversation> {
  if (request.endpoint !== "responses") return { sessionKey: sessionId, owner: undefined };
  const chain = (key: string | undefined): string | undefined => sessionId ?? (chainKeys ? key : undefined);
  const previous = request.previousResponseId;
  if (previous === undefined) {
    return { sessionKey: chain(request.store ? `response-chain:${requestId}` : undefined), owner: undefined };
  }
  const known = deps.responseOwners.owner(previous);
  const conversationOf = (owner: ResponseOwner | undefined): Conversation =>
    // Unknown (never seen, or forgotten): the session decides, and the engine answers for the id.
    owner === undefined
      ? { sessionKey: chain(`response-chain:${previous}`), owner: undefined }
      : { sessionKey: chain(owner.sessionKey), owner: liveOwner(deps.registry, previous, owner.backendId) };
  return known instanceof Promise ? known.then(conversationOf) : conversationOf(known);
}

/** The engine that stores `responseId`, or the clear error that its state is gone with that engine. */
export function liveOwner(registry: BackendRegistry, responseId: string, backendId: string): Backend {
  const backend = registry.get(backendId);
  if (backend === undefined || backend.state === "down") {
    const where = backend === undefined ? "was removed from the config" : "is down";
    throw new GatewayError(
      "response_lost",
      `response '${responseId}' was stored by engine '${backendId}', which ${where}: that conversation's ` +
        "state is lost with it; send the conversation again without previous_response_id",
      { param: "previous_response_id" },
    );
  }
  return backend;
}

export function rememberResponse(
  deps: ChainDeps,
  responseId: string,
  backendId: string,
  sessionKey: string,
): void | Promise<void> {
  return deps.responseOwners.remember(responseId, { backendId, sessionKey });
}
