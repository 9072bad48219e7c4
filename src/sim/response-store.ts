// The engine's memory of finished Responses (store: true): the response object and the conversation behind it.
//
// vLLM keeps them in a dict in that server's memory (with VLLM_ENABLE_RESPONSES_API_STORE=1) and never evicts;
// the simulator bounds it with an LRU so a long load study cannot grow it without limit.
import { LRUCache } from "lru-cache";
import type { ChatMessage } from "./chat-template.js";

export interface StoredResponse {
  /** The response object as the client got it. */
  body: Record<string, unknown>;
  /** Every message of the conversation up to and including this response's output (instructions excluded). */
  history: readonly ChatMessage[];
}

export class ResponseStore {
  private readonly entries: LRUCache<string, StoredResponse>;

  constructor(capacity: number) {
    this.entries = new LRUCache({ max: capacity });
  }

  get(id: string): StoredResponse | undefined {
    return this.entries.get(id);
  }

  put(id: string, entry: StoredResponse): void {
    this.entries.set(id, entry);
  }

  get size(): number {
    return this.entries.size;
  }
}
