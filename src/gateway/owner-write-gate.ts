// Read-your-writes for Responses chains across replicas: the answer that carries a response id completes only
// once the id's owner is written to the shared store, so the client's next turn finds it through any replica.
import type { ServerResponse } from "node:http";
import { responseIdOf, type AnswerSink } from "./attempt.js";

/**
 * The client's response, with its completion held until `writeOwner(responseId)` resolves. A non-streaming
 * answer's body names the id: its end waits for the write. A stream names it in its first event
 * (response.created): the write starts then, and what follows is held (in order) only while the write is
 * still running, which is seldom longer than the first tokens take. Whatever happens the answer completes:
 * the write is bounded by the store's timeout and never rejects.
 */
export class OwnerWriteGate implements AnswerSink {
  private status = 0;
  /** The answering engine, named by the attempt's own `x-agent-serve-backend` header. */
  private backendId = "";
  private responseId: string | undefined;
  /** Set while the owner's write runs: the writes and the end that wait for it, in order. */
  private held: (() => void)[] | undefined;
  private written: Promise<void> | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly writeOwner: (responseId: string, backendId: string) => void | Promise<void>,
  ) {}

  /** The id whose owner was written (undefined when the answer carried none). */
  get writtenId(): string | undefined {
    return this.written === undefined ? undefined : this.responseId;
  }

  writeHead(status: number, headers: string[]): unknown {
    this.status = status;
    const named = headers.indexOf("x-agent-serve-backend");
    if (named >= 0) this.backendId = headers[named + 1] ?? "";
    return this.res.writeHead(status, headers);
  }

  write(chunk: Buffer): boolean {
    if (this.held !== undefined) {
      this.held.push(() => this.res.write(chunk));
      return true;
    }
    const wrote = this.res.write(chunk);
    if (this.status === 200 && this.responseId === undefined) {
      const id = createdResponseId(chunk);
      if (id !== undefined) this.startWrite(id);
    }
    return wrote;
  }

  end(chunk?: Buffer): unknown {
    if (chunk !== undefined && this.status === 200 && this.responseId === undefined) {
      const id = responseIdOf(chunk);
      if (id !== undefined) this.startWrite(id);
    }
    if (this.held !== undefined) this.held.push(() => this.res.end(chunk));
    else this.res.end(chunk);
    return this;
  }

  cork(): void {
    this.res.cork();
  }

  uncork(): void {
    this.res.uncork();
  }

  get destroyed(): boolean {
    return this.res.destroyed;
  }

  get writableEnded(): boolean {
    return this.res.writableEnded;
  }

  once(event: "drain", listener: () => void): unknown {
    return this.res.once(event, listener);
  }

  off(event: "drain", listener: () => void): unknown {
    return this.res.off(event, listener);
  }

  private startWrite(responseId: string): void {
    this.responseId = responseId;
    const writing = this.writeOwner(responseId, this.backendId);
    this.written = Promise.resolve(writing);
    if (writing === undefined) return;
    const held: (() => void)[] = [];
    this.held = held;
    void writing.then(() => {
      this.held = undefined;
      for (const step of held) step();
    });
  }
}

/** The response id of a stream's response.created event, if this chunk carries it. */
function createdResponseId(chunk: Buffer): string | undefined {
  const text = chunk.toString("utf8");
  if (!text.includes("response.created")) return undefined;
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:") || !line.includes("response.created")) continue;
    try {
      const event = JSON.parse(line.slice(5)) as { type?: unknown; response?: { id?: unknown } };
      if (event.type === "response.created" && typeof event.response?.id === "string")
        return event.response.id;
    } catch {
      // not a whole event in this chunk: the relay writes whole events, so this is not the one
    }
  }
  return undefined;
}
