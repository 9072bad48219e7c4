// Per-flow FIFO lists of waiting requests, in the order flows were last sent to the back of the line.
import type { FlowItem } from "./types.js";

export class FlowLists<T extends FlowItem> {
  /** Map order is the round-robin order: a flow sent to the back is deleted and set again. */
  readonly flows = new Map<string, T[]>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  push(item: T): void {
    const list = this.flows.get(item.flow);
    if (list === undefined) this.flows.set(item.flow, [item]);
    else list.push(item);
    this.count++;
  }

  remove(item: T): boolean {
    const list = this.flows.get(item.flow);
    const at = list?.indexOf(item) ?? -1;
    if (at < 0) return false;
    this.takeAt(item.flow, at);
    return true;
  }

  /** Takes the request at `index` of `flow`'s list (a flow left empty leaves the line). */
  takeAt(flow: string, index: number): T {
    const list = this.flows.get(flow)!;
    const [item] = list.splice(index, 1);
    if (list.length === 0) this.flows.delete(flow);
    this.count--;
    return item!;
  }

  /** Sends a flow that still waits to the back of the rotation. */
  toBack(flow: string): void {
    const list = this.flows.get(flow);
    if (list === undefined) return;
    this.flows.delete(flow);
    this.flows.set(flow, list);
  }

  /** The newest request of the flow that `worse` ranks last among the waiting flows. */
  newestOfLast(worse: (a: string, b: string) => boolean): T | undefined {
    let chosen: string | undefined;
    for (const flow of this.flows.keys()) if (chosen === undefined || worse(flow, chosen)) chosen = flow;
    const list = chosen === undefined ? undefined : this.flows.get(chosen);
    return list?.[list.length - 1];
  }
}
