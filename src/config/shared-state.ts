// Config of where shared state lives (`affinity.store`, `admission.store`) and of engine `discovery`: what is built, and plain refusals of what is not yet.
import { z } from "zod";

/*
 * Issue 14 fixes these names (docs/architecture.md): `{kind: memory}` (the default) or
 * `{kind: redis, url, ...}` for both stores, and `discovery: [{name, tier, ..., refresh_seconds}]`.
 * Only the in-process memory store exists today. A config that asks for Redis or DNS discovery is refused
 * with a message saying so, never accepted and silently run on the memory store with static backends:
 * a deployment that believes its replicas share bindings while they do not would fail in the way the
 * issue describes, without a word. The store and discovery work replaces these refusals with the real
 * schemas, here and only here.
 */

/** The refusal of `{kind: redis}`; exported so tests (and the Kubernetes ConfigMap's test) pin the exact text. */
export function redisNotSupportedYet(what: string): string {
  return `kind 'redis' is not supported yet (the shared ${what} store of issue 14 is not built); only {kind: memory}, the default, is`;
}

export const DISCOVERY_NOT_SUPPORTED_YET =
  "not supported yet (DNS discovery of engines, issue 14, is not built); list the engines under backends";

function storeSchema(what: string) {
  const memory = z.strictObject({ kind: z.literal("memory") });
  // Any further keys of a redis store are not checked: the whole entry is refused.
  const redis = z
    .looseObject({ kind: z.literal("redis") })
    .pipe(z.never({ error: redisNotSupportedYet(what) }));
  return z
    .discriminatedUnion("kind", [memory, redis], {
      error: "must be {kind: memory}, the only store built so far",
    })
    .default({ kind: "memory" });
}

/** `affinity.store`: where session bindings live. */
export const bindingStoreSchema = storeSchema("binding");

/** `admission.store`: where token budgets are counted. */
export const budgetStoreSchema = storeSchema("budget");

/** `discovery`: absent is the only accepted value until DNS discovery is built. */
export const discoverySchema = z.never({ error: DISCOVERY_NOT_SUPPORTED_YET }).optional();
