// One configured engine as the gateway sees it: identity, health, drain flag, in-flight and queued counts.
import { hashString, type Hash64 } from "../affinity/hash.js";
import type { BackendState, SchedulingCandidate } from "../affinity/decide.js";
import type { BackendConfig } from "../config/schema.js";
import type { EngineLoad } from "./engine-load.js";
import { HealthStateMachine, type HealthThresholds } from "./health-state.js";

export class Backend implements SchedulingCandidate {
  readonly id: string;
  readonly tier: string;
  readonly idHash: Hash64;
  readonly health: HealthStateMachine;
  baseUrl: string;
  model: string;
  maxInflight: number;
  weight: number;
  gpu: string | undefined;
  /** Headers of every request to the engine: content type, and its API key when the config names one. */
  upstreamHeaders: Record<string, string>;
  /** Drained backends keep serving their pinned sessions but take no new ones. */
  drained = false;
  /**
   * Added while running (reload, discovery): down until its first health probe succeeds, so a new engine
   * never takes traffic before it answers. Backends of the config the gateway starts with start up.
   */
  awaitingFirstProbe = false;
  inflight = 0;
  /** Requests waiting at the gateway for a slot here (maintained by BackendSlots). */
  queued = 0;
  /** Requests placed here while their binding is written (maintained by PlacementService). */
  placing = 0;
  /** The engine's own last reported load (from its /metrics), if the gateway reads it. */
  engineLoad: EngineLoad | undefined;

  constructor(config: BackendConfig, thresholds: HealthThresholds) {
    this.id = config.id;
    this.tier = config.tier;
    this.idHash = hashString(config.id);
    this.health = new HealthStateMachine(thresholds);
    this.baseUrl = config.base_url;
    this.model = config.model;
    this.maxInflight = config.max_inflight;
    this.weight = config.weight;
    this.gpu = config.gpu;
    this.upstreamHeaders = upstreamHeadersFor(config);
  }

  get state(): BackendState {
    if (this.awaitingFirstProbe || this.health.health === "down") return "down";
    return this.drained ? "draining" : "up";
  }

  /** Applies a reloaded config entry with the same id and tier. */
  update(config: BackendConfig): void {
    this.baseUrl = config.base_url;
    this.model = config.model;
    this.maxInflight = config.max_inflight;
    this.weight = config.weight;
    this.gpu = config.gpu;
    this.upstreamHeaders = upstreamHeadersFor(config);
  }
}

/**
 * The engine's API key comes from the environment variable the config names (checked at start by
 * missingApiKeyEnv). Clients' own Authorization headers are never forwarded.
 */
function upstreamHeadersFor(config: BackendConfig): Record<string, string> {
  const key = config.api_key_env === undefined ? undefined : process.env[config.api_key_env];
  return key === undefined || key === ""
    ? { "content-type": "application/json" }
    : { "content-type": "application/json", authorization: `Bearer ${key}` };
}

/** Config problems of api_key_env entries whose variable is not set, one line each. */
export function missingApiKeyEnv(configs: readonly BackendConfig[]): string[] {
  return configs.flatMap((config, index) =>
    config.api_key_env !== undefined && !process.env[config.api_key_env]
      ? [`backends[${index}].api_key_env: environment variable ${config.api_key_env} is not set`]
      : [],
  );
}
