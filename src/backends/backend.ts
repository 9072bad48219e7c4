// One configured engine as the gateway sees it: identity, health, drain flag and in-flight count.
import { hashString, type Hash64 } from "../affinity/hash.js";
import type { BackendState, SchedulingCandidate } from "../affinity/scheduler.js";
import type { BackendConfig } from "../config/schema.js";
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
  /** Drained backends keep serving their pinned sessions but take no new ones. */
  drained = false;
  inflight = 0;

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
  }

  get state(): BackendState {
    if (this.health.health === "down") return "down";
    return this.drained ? "draining" : "up";
  }

  /** Applies a reloaded config entry with the same id and tier. */
  update(config: BackendConfig): void {
    this.baseUrl = config.base_url;
    this.model = config.model;
    this.maxInflight = config.max_inflight;
    this.weight = config.weight;
    this.gpu = config.gpu;
  }
}
