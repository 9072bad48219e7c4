// The engine's slots: each holds one sequence's KV state; a request takes the idle slot that serves it best.
//
// Like llama.cpp's server, a slot keeps its state after a request, so the next request that starts with the same
// tokens (the next turn of the same conversation) evaluates only what comes after the common prefix. The choice:
//   1. a slot whose whole state the prompt starts with (nothing is thrown away; an empty slot counts, reusing
//      nothing), the one holding the most;
//   2. otherwise the slot sharing the longest prefix with the prompt (its tail is erased).
// Ties go to the least recently used slot. Rule 1 keeps a conversation's history from being overwritten by a new
// conversation that only shares its system prompt while a free slot exists. When every slot is busy, requests
// wait in arrival order.

export interface SlotLike {
  /** The tokens whose state the slot holds now. */
  readonly contextTokens: readonly number[];
}

export interface Claim<S> {
  slot: S;
  /** Leading prompt tokens the slot already holds. */
  commonPrefix: number;
}

export function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
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
    if (signal?.aborted) return Promise.reject(new Error("aborted"));
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
          reject(new Error("aborted"));
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
      const keepsAll = prefix === slot.contextTokens.length ? 1 : 0;
      const key: [number, number, number] = [keepsAll, prefix, -this.lastUsed.get(slot)!];
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
