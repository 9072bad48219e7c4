// The slot queue's and flow scheduler's settings from config, in one place for start and reload.
import type { GatewayConfig } from "../config/schema.js";
import type { QueueSettings } from "./backend-slots.js";
import type { AttainedServiceSettings } from "./flow-queue/attained-service.js";

export function queueSettingsOf(config: GatewayConfig): QueueSettings {
  const { admission } = config;
  return {
    maxQueueSize: admission.max_queue_size,
    queueTimeoutMs: admission.queue_timeout_seconds * 1000,
    policy: admission.scheduling.policy,
    bands: admission.scheduling.bands,
    maxInflightPerAgent: admission.max_inflight_per_agent,
    defaultBand: admission.scheduling.default_band,
  };
}

export function attainedServiceSettingsOf(config: GatewayConfig): AttainedServiceSettings {
  const { scheduling } = config.admission;
  return { halfLifeMs: scheduling.half_life_seconds * 1000, maxFlows: scheduling.max_flows };
}
