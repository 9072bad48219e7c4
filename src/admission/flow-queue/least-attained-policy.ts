// `least-attained` (the default): the flow that has been served least lately goes first (Autellix's program-level
// least attained service), so an agent's burst cannot crowd out an agent taking one turn at a time.
import type { AttainedService } from "./attained-service.js";
import { FlowLists } from "./flow-lists.js";
import type { FlowItem, FlowPolicy } from "./types.js";

export class LeastAttainedPolicy<T extends FlowItem> implements FlowPolicy<T> {
  private readonly lists = new FlowLists<T>();

  constructor(private readonly service: AttainedService) {}

  get size(): number {
    return this.lists.size;
  }

  push(item: T): void {
    this.lists.push(item);
  }

  remove(item: T): boolean {
    return this.lists.remove(item);
  }

  /** The oldest eligible request of the flow with the least service; ties go to the earlier arrival. */
  take(eligible: (item: T) => boolean): T | undefined {
    let best: { flow: string; at: number; service: number; seq: number } | undefined;
    for (const [flow, list] of this.lists.flows) {
      const at = list.findIndex(eligible);
      if (at < 0) continue;
      const service = this.service.value(flow);
      const seq = list[at]!.seq;
      if (best === undefined || service < best.service || (service === best.service && seq < best.seq)) {
        best = { flow, at, service, seq };
      }
    }
    return best === undefined ? undefined : this.lists.takeAt(best.flow, best.at);
  }

  /** The newest request of the flow with the most service (the most waiting among equals). */
  last(): T | undefined {
    const flows = this.lists.flows;
    return this.lists.newestOfLast((a, b) => {
      const sa = this.service.value(a);
      const sb = this.service.value(b);
      return sa > sb || (sa === sb && flows.get(a)!.length >= flows.get(b)!.length);
    });
  }
}
