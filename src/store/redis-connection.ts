// Where and how a Redis store connects: its URL (from the config or an environment variable), password, TLS.
import { readFileSync } from "node:fs";
import type { ConnectionOptions } from "node:tls";
import type { RedisStoreConfig } from "../config/shared-state.js";

export interface RedisConnection {
  /** The URL ioredis connects to, the password (from password_env) in it: never logged. */
  url: string;
  /** TLS options beyond the URL's scheme (a private CA); undefined: what the scheme says. */
  tls: ConnectionOptions | undefined;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Problems of a redis store's environment (a named variable unset or not a redis URL), one line each. */
export function redisEnvProblems(store: RedisStoreConfig, path: string, env: Env = process.env): string[] {
  const problems: string[] = [];
  for (const key of ["url_env", "password_env"] as const) {
    const name = store[key];
    if (name !== undefined && !env[name])
      problems.push(`${path}.${key}: environment variable ${name} is not set`);
  }
  const fromEnv = store.url_env === undefined ? undefined : env[store.url_env];
  if (fromEnv && !/^rediss?:\/\/[^/?#]+/.test(fromEnv))
    problems.push(`${path}.url_env: ${store.url_env} does not hold a redis:// or rediss:// URL`);
  if (store.tls_ca_file !== undefined) {
    try {
      readFileSync(store.tls_ca_file);
    } catch (err) {
      problems.push(`${path}.tls_ca_file: cannot read ${store.tls_ca_file} (${(err as Error).message})`);
    }
  }
  return problems;
}

/** The connection of a store whose environment redisEnvProblems found complete. */
export function redisConnection(store: RedisStoreConfig, env: Env = process.env): RedisConnection {
  const url = new URL((store.url_env === undefined ? undefined : env[store.url_env]) ?? store.url!);
  const password = store.password_env === undefined ? undefined : env[store.password_env];
  if (password) url.password = encodeURIComponent(password);
  if (store.tls === true && url.protocol === "redis:") url.protocol = "rediss:";
  const tls = store.tls_ca_file === undefined ? undefined : { ca: readFileSync(store.tls_ca_file) };
  return { url: url.toString(), tls };
}
