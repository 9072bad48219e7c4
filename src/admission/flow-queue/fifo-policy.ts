// `fifo`: first come, first served within a band, whoever asks (the gateway's order before flows existed).
import type { FlowItem, FlowPolicy } from "./types.js";

export class FifoPolicy<T extends FlowItem> implements FlowPolicy<T> {
  /** In arrival order: items are pushed with rising seq. */
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    this.items.push(item);
  }

  remove(item: T): boolean {
    const at = this.items.indexOf(item);
    if (at < 0) return false;
    this.items.splice(at, 1);
    return true;
  }

  take(eligible: (item: T) => boolean): T | undefined {
    const at = this.items.findIndex(eligible);
    return at < 0 ? undefined : this.items.splice(at, 1)[0];
  }

  /** The newest arrival: under FIFO the request that came last is shed first. */
  last(): T | undefined {
    return this.items[this.items.length - 1];
  }
}
