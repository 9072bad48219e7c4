// ioredis's client class, loaded on first use: a gateway whose stores are all in memory never loads it.
import { createRequire } from "node:module";
import type { Redis } from "ioredis";

const requireModule = createRequire(import.meta.url);
let loaded: typeof Redis | undefined;

/**
 * The `Redis` class. Loading ioredis costs about 200 ms of CPU (a quarter of a gateway's start-up, measured in
 * bench/README.md), and most gateways keep bindings, budgets and receipts in memory; ioredis is CommonJS, so
 * a synchronous require keeps the stores' constructors synchronous.
 */
export function ioredisClass(): typeof Redis {
  loaded ??= (requireModule("ioredis") as typeof import("ioredis")).Redis;
  return loaded;
}
