// A tool call cut halfway is restarted, not continued: the next engine generates the call again from the text
// before it, and only what extends the arguments the client already holds goes on to the client. A regenerated call
// that disagrees with that part cannot be spliced (the client cannot take bytes back): the stream then ends with
// an error event that says so.
import type { ToolCallSoFar } from "./transcript.js";

export class RegeneratedCall {
  /** Characters of the relayed arguments the regenerated ones matched so far. */
  private matched = 0;
  /** Set once the regenerated call disagrees with the relayed one. */
  diverged: string | undefined;

  constructor(readonly relayed: ToolCallSoFar) {}

  /** The regenerated call's name: it must be the relayed call's. */
  named(name: string): void {
    if (name !== "" && this.relayed.name !== "" && name !== this.relayed.name)
      this.diverged ??= `the regenerated tool call is '${name}', the client was sent '${this.relayed.name}'`;
  }

  /** The part of the next regenerated arguments piece the client does not hold yet ("" when none). */
  next(piece: string): string {
    if (this.diverged !== undefined) return "";
    const held = this.relayed.args;
    if (this.matched >= held.length) return piece;
    const overlap = Math.min(piece.length, held.length - this.matched);
    if (piece.slice(0, overlap) !== held.slice(this.matched, this.matched + overlap)) {
      this.diverged = `the regenerated arguments of tool call '${this.relayed.name}' differ from the part relayed`;
      return "";
    }
    this.matched += overlap;
    return piece.slice(overlap);
  }

  /** The regenerated call ended: it must have covered every relayed argument character. */
  end(): void {
    if (this.matched < this.relayed.args.length)
      this.diverged ??= `the regenerated tool call '${this.relayed.name}' is shorter than the part relayed`;
  }
}
