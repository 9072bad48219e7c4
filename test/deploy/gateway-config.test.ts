// The ConfigMap's gateway.yaml through the gateway's own loader: valid, and consistent with the manifests.
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { parseConfig, parseConfigText } from "../../src/config/load.js";
import { byName, containerPort, podOf, renderBase } from "./base.js";

const base = renderBase();
const text = byName(base.configMaps, "agent-serve-config").data?.["gateway.yaml"] ?? "";
// The namespace kustomize put the objects in: the config's DNS names must use it.
const NAMESPACE = byName(base.configMaps, "agent-serve-config").metadata?.namespace ?? "(none)";
const clusterName = (service: string) => `${service}.${NAMESPACE}.svc.cluster.local`;

interface RedisStore {
  kind: string;
  url: string;
  timeout_ms: number;
  key_prefix: string;
}
interface DiscoveryEntry {
  name: string;
  tier: string;
  type: string;
  port: number;
  model: string;
  max_inflight: number;
  refresh_seconds: number;
}
interface RawConfig {
  discovery: DiscoveryEntry[];
  affinity: { store: RedisStore } & Record<string, unknown>;
  admission: { store: RedisStore } & Record<string, unknown>;
  [key: string]: unknown;
}
const raw = parseYaml(text) as RawConfig;

/**
 * The same config in the form today's gateway runs: no shared stores, and in place of each discovery
 * entry the engines its headless Service would resolve to, listed by their StatefulSet pods' stable names.
 */
function withoutUnbuiltParts(config: RawConfig): Record<string, unknown> {
  const { discovery, ...rest } = structuredClone(config);
  delete (rest.affinity as Record<string, unknown>)["store"];
  delete (rest.admission as Record<string, unknown>)["store"];
  const backends = discovery.flatMap((entry) => {
    const service = entry.name.split(".")[0]!;
    const set = base.statefulSets.find((s) => s.spec?.serviceName === service);
    const replicas = set?.spec?.replicas ?? 0;
    return Array.from({ length: replicas }, (_, i) => ({
      id: `${set!.metadata!.name}-${i}`,
      tier: entry.tier,
      base_url: `http://${set!.metadata!.name}-${i}.${entry.name}:${entry.port}`,
      model: entry.model,
      max_inflight: entry.max_inflight,
    }));
  });
  return { ...rest, backends };
}

describe("the ConfigMap's gateway.yaml", () => {
  it("is accepted by the gateway's own loader: engines from discovery, both stores on redis", () => {
    const config = parseConfigText(text, "gateway.yaml", {});
    expect(config.backends).toEqual([]);
    expect(config.discovery).toHaveLength(1);
    expect(config.affinity.store.kind).toBe("redis");
    expect(config.admission.store.kind).toBe("redis");
  });

  it("is accepted by the loader once those parts are replaced by what runs today", () => {
    const config = parseConfig(withoutUnbuiltParts(raw), "gateway.yaml (static form)", {});
    expect(config.backends.map((b) => b.id)).toEqual(["vllm-small-0", "vllm-small-1"]);
    expect(config.backends[0]!.base_url).toBe(
      "http://vllm-small-0.vllm-small.agent-serve.svc.cluster.local:8000",
    );
    expect(config.affinity.sticky_ttl_seconds).toBe(1800);
  });

  it("listens on the port the container, the probes and the Service use", () => {
    const config = parseConfig(withoutUnbuiltParts(raw), "gateway.yaml", {});
    const container = podOf(byName(base.deployments, "agent-serve")).containers[0]!;
    expect(containerPort(container, "http")).toBe(config.server.port);
    expect(config.server.host).toBe("0.0.0.0");
  });

  it("has a shutdown grace that fits, with the preStop sleep, in the pod's termination grace period", () => {
    const config = parseConfig(withoutUnbuiltParts(raw), "gateway.yaml", {});
    const gateway = byName(base.deployments, "agent-serve");
    const sleepSeconds = Number(podOf(gateway).containers[0]!.lifecycle?.preStop?.exec?.command?.[1]);
    const terminationSeconds = gateway.spec?.template.spec?.terminationGracePeriodSeconds ?? 30;
    // Kubernetes counts the preStop hook inside the grace period; SIGKILL comes at its end.
    expect(sleepSeconds + config.server.shutdown_grace_seconds).toBeLessThan(terminationSeconds);
    expect(config.server.shutdown_grace_seconds).toBeGreaterThan(0);
  });

  it("discovers the engines through their headless Service: port, tier and model agree with the StatefulSet", () => {
    expect(raw.discovery).toHaveLength(1);
    for (const entry of raw.discovery) {
      const service = byName(base.services, entry.name.split(".")[0]!);
      expect(entry.name).toBe(clusterName(service.metadata!.name!));
      expect(service.spec?.clusterIP).toBe("None");
      expect(entry.type).toBe("A");
      expect(service.spec?.ports?.map((p) => p.port)).toContain(entry.port);
      const set = base.statefulSets.find((s) => s.spec?.serviceName === service.metadata?.name)!;
      const pod = podOf(set);
      expect(pod.labels["agent-serve/tier"]).toBe(entry.tier);
      expect(pod.containers[0]!.args?.[0]).toBe(entry.model);
      expect(entry.refresh_seconds).toBeGreaterThan(0);
    }
  });

  it("points both stores at the redis Service's port, under different key prefixes", () => {
    const service = byName(base.services, "redis");
    for (const store of [raw.affinity.store, raw.admission.store]) {
      const url = new URL(store.url);
      expect(url.protocol).toBe("redis:");
      expect(url.hostname).toBe(clusterName("redis"));
      expect(service.spec?.ports?.map((p) => p.port)).toContain(Number(url.port));
      expect(store.timeout_ms).toBeGreaterThan(0);
    }
    expect(raw.affinity.store.key_prefix).not.toBe(raw.admission.store.key_prefix);
  });
});
