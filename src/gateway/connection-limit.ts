// The open-file limit read at start, and the default client-connection cap derived from it.
import { readFileSync } from "node:fs";

/** The cap when the open-file limit is unknown or very large (the schema's former default). */
export const MAX_DEFAULT_CONNECTIONS = 10_000;
/** Descriptors kept for everything but sockets: logs, config reads, node's own, the libuv spare. */
const RESERVED_DESCRIPTORS = 64;
const MIN_CONNECTIONS = 16;

/**
 * The soft RLIMIT_NOFILE of this process, or undefined where it cannot be read. Node has no API for it;
 * Linux shows it in /proc/self/limits ("Max open files  <soft>  <hard>  files").
 */
export function openFileLimit(
  readLimits: () => string = () => readFileSync("/proc/self/limits", "utf8"),
): number | undefined {
  try {
    const line = readLimits()
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
    if (soft === undefined || soft === "unlimited") return undefined;
    const value = Number(soft);
    return Number.isInteger(value) && value > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What the engine connections leave of the open-file limit, well under it: each backend may hold its pool
 * (at most its max_inflight sockets in use) plus a probe and a metrics connection.
 */
export function defaultMaxConnections(fileLimit: number | undefined, upstreamSockets: number): number {
  if (fileLimit === undefined) return MAX_DEFAULT_CONNECTIONS;
  const room = Math.floor((fileLimit - upstreamSockets - RESERVED_DESCRIPTORS) * 0.9);
  return Math.min(MAX_DEFAULT_CONNECTIONS, Math.max(MIN_CONNECTIONS, room));
}
