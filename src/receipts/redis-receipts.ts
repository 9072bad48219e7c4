// Memory of each session's last turn in Redis, shared by every replica: one key per session holding its entry
// as JSON, read at the start of a turn and written (without waiting) at its end; fails open like the bindings.
import { LuaScript, UNAVAILABLE, type RedisLink } from "../store/redis-link.js";
import type { ReceiptMemory, SessionReceipts } from "./receipt-memory.js";

/** KEYS: P r:<session>. Returns the entry or nil. */
const READ = new LuaScript(`return redis.call('GET', KEYS[1])`, 1);

/** KEYS: P r:<session>. ARGV: entry JSON, ttlMs. */
const WRITE = new LuaScript(`redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1`, 1);

export const RECEIPT_SCRIPTS: readonly LuaScript[] = [READ, WRITE];

export class RedisReceipts implements ReceiptMemory {
  constructor(
    private readonly link: RedisLink,
    private readonly keyPrefix: string,
    private readonly ttlMs: number,
  ) {}

  async read(key: string): Promise<SessionReceipts | undefined> {
    const reply = await this.link.run(READ, [this.keyOf(key)], []);
    if (reply === UNAVAILABLE || typeof reply !== "string") return undefined;
    return parseEntry(reply);
  }

  write(key: string, entry: SessionReceipts): void {
    this.link.send(WRITE, [this.keyOf(key)], [JSON.stringify(entry), Math.max(1, Math.round(this.ttlMs))]);
  }

  flush(): Promise<void> {
    return this.link.flush();
  }

  close(): Promise<void> {
    return this.link.close();
  }

  private keyOf(key: string): string {
    return `${this.keyPrefix}r:${key}`;
  }
}

/** An entry as stored; anything else (another version's, a hand edit) reads as no entry. */
function parseEntry(text: string): SessionReceipts | undefined {
  try {
    const value = JSON.parse(text) as Partial<SessionReceipts>;
    const last = value.last;
    if (
      typeof last !== "object" ||
      last === null ||
      typeof last.chain !== "string" ||
      typeof last.items !== "number" ||
      typeof last.tokens !== "number" ||
      typeof last.backendId !== "string" ||
      !Array.isArray(value.receipts)
    )
      return undefined;
    return value as SessionReceipts;
  } catch {
    return undefined;
  }
}
