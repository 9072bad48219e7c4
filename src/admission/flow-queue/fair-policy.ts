// `fair`: round-robin between flows within a band, so a burst of one flow takes one turn in each round.
import { FlowLists } from "./flow-lists.js";
import type { FlowItem, FlowPolicy } from "./types.js";

export class FairPolicy<T extends FlowItem> implements FlowPolicy<T> {
  private readonly lists = new FlowLists<T>();

  get size(): number {
    return this.lists.size;
  }

  push(item: T): void {
    this.lists.push(item);
  }

  remove(item: T): boolean {
    return this.lists.remove(item);
  }

  /** The next flow in the rotation with an eligible request serves its oldest one, then goes to the back. */
  take(eligible: (item: T) => boolean): T | undefined {
    for (const [flow, list] of this.lists.flows) {
      const at = list.findIndex(eligible);
      if (at < 0) continue;
      const item = this.lists.takeAt(flow, at);
      this.lists.toBack(flow);
      return item;
    }
    return undefined;
  }

  /** The newest request of the flow with the most waiting: the one whose turn comes last. */
  last(): T | undefined {
    const flows = this.lists.flows;
    return this.lists.newestOfLast((a, b) => flows.get(a)!.length >= flows.get(b)!.length);
  }
}
