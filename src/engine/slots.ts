// The engine's slots: each holds one sequence's KV state; a request takes the idle slot that serves it best.
//
// Like llama.cpp's server, a slot keeps its state after a request, so the next request that starts with the same
// tokens (the next turn of the same conversation) evaluates only what comes after the common prefix.
//
// A slot's state is the prompt it was sent followed by the tokens it generated. The next turn does not always start
// with those generated tokens: the client sends the reply back as text, and text re-tokenizes as the tokenizer
// likes (a reply generated as " pric" "eless" comes back as " priceless"; with random weights which ids come out
// depends on the CPU's arithmetic). So a slot counts as holding a prompt's conversation when the common prefix
// covers what the slot was sent, whatever follows; its generated tail is not asked to match. The choice:
//   1. a slot holding the prompt's conversation, the one sharing the most tokens with it; an empty slot counts,
//      sharing none (so a new conversation goes to a free slot rather than over another one's history);
//   2. otherwise the slot sharing the longest prefix with the prompt (its tail is erased).
// Ties go to the least recently used slot. When every slot is busy, requests wait in arrival order.
//
// llama.cpp's server instead takes the idle slot with the longest common prefix among those where it is more than a
// share of the slot's state (`--slot-prompt-similarity`, 0.5 in the releases checked), else the least recently used
// slot. That also survives a re-tokenized reply, but lets a new conversation whose system prompt is most of another
// conversation's state overwrite that history while a slot is free.

import { SimRequestError } from "../surface/errors.js";

/**
 * Why a request waiting for a slot never got one: withdrawn by its signal (the client left), or the engine is
 * closing. One of the engines' errors (SimRequestError): a 500 in vLLM's envelope if it reaches a client.
 */
export class SlotWaitError extends SimRequestError {
  override name = "SlotWaitError";
  constructor(
    readonly code: "aborted" | "engine_closing",
    message: string,
  ) {
    super(message, 500, "InternalServerError");
  }
}

export interface SlotLike {
  /** The tokens whose state the slot holds now. */
  readonly contextTokens: readonly number[];
  /** How many leading `contextTokens` requests sent as prompt; the rest the slot generated itself. */
  readonly sentTokenCount: number;
}

export interface Claim<S> {
  slot: S;
  /** Leading prompt tokens the slot already holds. */
  commonPrefix: number;
}

/**
 * Sent tokens at the end of a slot's prompt that a continuation may still differ in. A text prompt's last word can
 * merge with the text appended to it: "Answer: " ends in a token " " that "Answer: Paris" spells " Paris". Chat
 * prompts need it only after a continued final message (continue_final_message, a prefill), whose open text the
 * next turn sends whole: its last token may merge with the text that completes it.
 */
export const SENT_TAIL_SLACK_TOKENS = 1;

export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Whether `prompt` continues the conversation whose state `slot` holds (see the file comment). */
export function holdsConversation(slot: SlotLike, commonPrefix: number): boolean {
  const held = slot.contextTokens.length;
  if (held === 0) return true;
  const sent = Math.min(slot.sentTokenCount, held);
  return commonPrefix > 0 && commonPrefix >= sent - SENT_TAIL_SLACK_TOKENS;
}

interface Waiter<S> {
  prompt: readonly number[];
  resolve: (claim: Claim<S>) => void;
  reject: (err: Error) => void;
}

export class SlotPool<S extends SlotLike> {
  private readonly idle: S[];
  private readonly lastUsed = new Map<S, number>();
  private readonly waiters: Waiter<S>[] = [];
  private uses = 0;

  constructor(readonly slots: readonly S[]) {
    this.idle = [...slots];
    slots.forEach((slot) => this.lastUsed.set(slot, -1));
  }

  get busy(): number {
    return this.slots.length - this.idle.length;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** Resolves with a slot as soon as one is free; `signal` withdraws a request that is still waiting. */
  acquire(prompt: readonly number[], signal?: AbortSignal): Promise<Claim<S>> {
    if (signal?.aborted)
      return Promise.reject(
        new SlotWaitError("aborted", "the request was withdrawn while waiting for a slot"),
      );
    if (this.idle.length > 0 && this.waiters.length === 0) return Promise.resolve(this.take(prompt));
    return new Promise((resolve, reject) => {
      const waiter: Waiter<S> = { prompt, resolve, reject };
      this.waiters.push(waiter);
      signal?.addEventListener(
        "abort",
        () => {
          const index = this.waiters.indexOf(waiter);
          if (index < 0) return;
          this.waiters.splice(index, 1);
          reject(new SlotWaitError("aborted", "the request was withdrawn while waiting for a slot"));
        },
        { once: true },
      );
    });
  }

  release(slot: S): void {
    this.idle.push(slot);
    const next = this.waiters.shift();
    if (next) next.resolve(this.take(next.prompt));
  }

  /** Fails every waiting request (the engine is closing). */
  rejectWaiting(err: Error): void {
    for (const waiter of this.waiters.splice(0)) waiter.reject(err);
  }

  private take(prompt: readonly number[]): Claim<S> {
    let best = -1;
    let bestKey: [number, number, number] = [-1, -1, 0];
    this.idle.forEach((slot, index) => {
      const prefix = commonPrefixLength(slot.contextTokens, prompt);
      const holds = holdsConversation(slot, prefix) ? 1 : 0;
      const key: [number, number, number] = [holds, prefix, -this.lastUsed.get(slot)!];
      if (best < 0 || compareKeys(key, bestKey) > 0) {
        best = index;
        bestKey = key;
      }
    });
    const [slot] = this.idle.splice(best, 1) as [S];
    this.lastUsed.set(slot, this.uses++);
    return { slot, commonPrefix: bestKey[1] };
  }
}

function compareKeys(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}
