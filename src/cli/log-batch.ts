// Gathers the gateway's JSON log lines into batches in front of pino's destination (sonic-boom), flushed on size,
// on a short timer, on request and at exit.
//
// sonic-boom gathers lines itself (minLength), but measures its growing batch with Buffer.byteLength on every
// line, which flattens the batch string each time: a copy of everything gathered so far per line, about 2 µs
// of CPU per request with 16 KB batches (bench/README.md, "Ninth round"). Here lines are kept in an array and
// joined once per batch, which sonic-boom then writes at once (its own minLength is 0).

/** What the batch writes to: a sonic-boom stream, as pino.destination() makes it. */
export interface LineSink {
  write(text: string): boolean;
  flush(callback?: (err?: Error) => void): void;
  flushSync(): void;
}

export class LogLineBatch {
  private lines: string[] = [];
  private chars = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly onExit = (): void => this.flushSync();

  constructor(
    private readonly sink: LineSink,
    /** A batch is handed on once it holds this many characters (a line is mostly ASCII: about as many bytes). */
    private readonly batchChars: number,
    /** The longest a line waits in the batch: a quiet gateway's lines still show up at once to a person. */
    flushIntervalMs: number,
  ) {
    this.timer = setInterval(() => this.handOn(), flushIntervalMs);
    this.timer.unref();
    // pino flushes its own destination at exit; the lines still gathered here must reach it first.
    process.once("exit", this.onExit);
  }

  write(line: string): boolean {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= this.batchChars) this.handOn();
    return true;
  }

  /** pino's logger.flush(callback): what is gathered, then the destination's own flush. */
  flush(callback?: (err?: Error) => void): void {
    this.handOn();
    this.sink.flush(callback);
  }

  flushSync(): void {
    this.handOn();
    this.sink.flushSync();
  }

  private handOn(): void {
    if (this.lines.length === 0) return;
    const text = this.lines.length === 1 ? this.lines[0]! : this.lines.join("");
    this.lines = [];
    this.chars = 0;
    this.sink.write(text);
  }
}
