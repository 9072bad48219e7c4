// Writes whose effect every replica must see before the turn that made them is answered (read-your-writes).
import { UNAVAILABLE, type RedisLink } from "./redis-link.js";
import type { ScriptCall } from "./write-behind.js";

/**
 * Runs `call` and resolves once Redis answered it and has also sent out what it published meanwhile (its
 * invalidation messages): a PING answered after the write's reply means the event loop turn that sent the
 * reply (and every pub/sub message of that turn) is over. Resolves UNAVAILABLE when Redis did not answer
 * within the link's timeout (the caller then queues the write like a write-behind one).
 */
export async function writeThrough(link: RedisLink, call: ScriptCall): Promise<unknown> {
  const reply = await link.run(call.script, call.keys, call.args);
  if (reply === UNAVAILABLE) return reply;
  await link.client.ping().catch(() => undefined);
  return reply;
}

/**
 * Resolves after the event loop has run the I/O callbacks that were ready when it was called: invalidation
 * messages that reached this replica before a request did have been read when it resolves.
 */
export function afterReadyIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
