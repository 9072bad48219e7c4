// Closed by default: a gateway that listens beyond loopback needs client API keys, or an explicit allow_open.
import { isIP } from "node:net";
import type { GatewayConfig } from "./schema.js";

/** Whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (bare === "localhost" || bare === "::1") return true;
  const v4 = bare.startsWith("::ffff:") ? bare.slice("::ffff:".length) : bare;
  return isIP(v4) === 4 && v4.startsWith("127.");
}

/**
 * Why this config must not start: it listens on a non-loopback host (every pod of a cluster, every machine of a
 * network could reach it) with no client API keys, and does not say `server.allow_open: true`. undefined: fine.
 */
export function openExposureProblem(config: GatewayConfig): string | undefined {
  const { host, api_keys: keys, allow_open: allowOpen } = config.server;
  if (isLoopbackHost(host) || keys.length > 0 || allowOpen) return undefined;
  return (
    `server.host: ${host} is reachable from other machines, and there are no client API keys: ` +
    "anyone who reaches it could use the engines. Add keys (server.api_keys, or AGENT_SERVE_API_KEYS; " +
    "'agent-serve hash-key -' makes their hashes), listen on 127.0.0.1, or set server.allow_open: true " +
    "if something in front of it (a firewall, a proxy that authenticates) keeps it closed (docs/deployment.md)"
  );
}
