// Where an attempt writes the answer to a request the gateway makes itself (the tier classifier's question, the
// owner search's reads): kept in memory, as the attempt would write it to a client.
import type { AnswerSink } from "./attempt.js";

/** An answer in memory: its status, and its bytes unless only the status matters. */
export class BufferedAnswer implements AnswerSink {
  status = 0;
  private readonly chunks: Buffer[] = [];
  readonly destroyed = false;
  writableEnded = false;

  /** @param keep "status": the body's bytes are dropped as they come (the owner search reads only the status) */
  constructor(private readonly keep: "body" | "status" = "body") {}

  writeHead(status: number): void {
    this.status = status;
  }

  write(chunk: Buffer): boolean {
    if (this.keep === "body") this.chunks.push(chunk);
    return true;
  }

  end(chunk?: Buffer): void {
    if (chunk !== undefined && this.keep === "body") this.chunks.push(chunk);
    this.writableEnded = true;
  }

  cork(): void {}
  uncork(): void {}
  once(): void {}
  off(): void {}

  text(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }
}
