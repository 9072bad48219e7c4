// The kustomize base's access rules: NetworkPolicies (evaluated), the Redis password from one Secret, /admin on its own port and Service.
import { readFileSync } from "node:fs";
import type { INetworkPolicy, INetworkPolicyPeer } from "kubernetes-models/networking.k8s.io/v1";
import type { IContainer } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import { openExposureProblem } from "../../src/config/exposure.js";
import { parseConfigText } from "../../src/config/load.js";
import type { RedisStoreConfig } from "../../src/config/shared-state.js";
import { redisConnection, redisEnvProblems } from "../../src/store/redis-connection.js";
import { byName, containerPort, podOf, renderBase, repoPath } from "./base.js";

const base = renderBase();
const NAMESPACE = "agent-serve";
const gateway = byName(base.deployments, "agent-serve");
const gatewayPod = podOf(gateway);
const gatewayContainer = gatewayPod.containers[0]!;
const redisPod = podOf(byName(base.statefulSets, "redis"));
const redisContainer = redisPod.containers[0]!;
const enginePod = podOf(byName(base.statefulSets, "vllm-small"));
const config = parseConfigText(
  byName(base.configMaps, "agent-serve-config").data?.["gateway.yaml"] ?? "",
  "gateway.yaml",
  {},
);

type Labels = Record<string, string>;
interface Pod {
  namespace: string;
  /** The labels of the pod's namespace. */
  namespaceLabels: Labels;
  labels: Labels;
  /** Its container, for named ports; none for a pod outside the base. */
  container?: IContainer;
}

/** A matchLabels selector: `{}` selects everything (unlike a Service's selector). */
function matches(selector: { matchLabels?: Labels } | undefined, labels: Labels): boolean {
  return Object.entries(selector?.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
}

function peerAdmits(peer: INetworkPolicyPeer, policyNamespace: string, from: Pod): boolean {
  if (peer.ipBlock !== undefined) return false;
  const namespaceOk =
    peer.namespaceSelector === undefined
      ? from.namespace === policyNamespace
      : matches(peer.namespaceSelector, from.namespaceLabels);
  return namespaceOk && (peer.podSelector === undefined || matches(peer.podSelector, from.labels));
}

/**
 * NetworkPolicy semantics for ingress: a pod no policy selects takes every connection; a selected pod only
 * those some rule of a selecting policy allows (its peers, or anyone when it names none; its ports).
 */
function admits(policies: readonly INetworkPolicy[], from: Pod, to: Pod, port: number): boolean {
  const selecting = policies.filter(
    (p) =>
      p.metadata?.namespace === to.namespace &&
      (p.spec?.policyTypes ?? ["Ingress"]).includes("Ingress") &&
      matches(p.spec?.podSelector, to.labels),
  );
  if (selecting.length === 0) return true;
  return selecting.some((policy) =>
    (policy.spec?.ingress ?? []).some((rule) => {
      const peerOk =
        rule.from === undefined ||
        rule.from.length === 0 ||
        rule.from.some((peer) => peerAdmits(peer, policy.metadata!.namespace!, from));
      const portOk =
        rule.ports === undefined ||
        rule.ports.length === 0 ||
        rule.ports.some((p) => (to.container ? containerPort(to.container, p.port) : p.port) === port);
      return peerOk && portOk;
    }),
  );
}

const inBase = (labels: Labels, container?: IContainer): Pod => ({
  namespace: NAMESPACE,
  namespaceLabels: { "kubernetes.io/metadata.name": NAMESPACE },
  labels,
  ...(container === undefined ? {} : { container }),
});
const gatewayP = inBase(gatewayPod.labels, gatewayContainer);
const redisP = inBase(redisPod.labels, redisContainer);
const engineP = inBase(enginePod.labels, enginePod.containers[0]!);
const otherPod = inBase({ app: "something-else" });
const adminClient = inBase({ app: "ops-shell", "agent-serve/admin-client": "true" });
const elsewhere: Pod = {
  namespace: "default",
  namespaceLabels: { "kubernetes.io/metadata.name": "default" },
  labels: { app: "something-else" },
};
const prometheus: Pod = {
  namespace: "monitoring",
  namespaceLabels: { "kubernetes.io/metadata.name": "monitoring" },
  labels: { "app.kubernetes.io/name": "prometheus" },
};

const port = (container: IContainer, name: string): number => containerPort(container, name)!;
const REDIS = port(redisContainer, "redis");
const ENGINE = port(enginePod.containers[0]!, "http");
const API = port(gatewayContainer, "http");
const ADMIN = port(gatewayContainer, "admin");

describe("NetworkPolicies of the base", () => {
  const policies = base.networkPolicies;

  it("cover Redis, the engines and the gateway; every workload's pods are selected by one", () => {
    for (const workload of [...base.deployments, ...base.statefulSets]) {
      const labels = podOf(workload).labels;
      expect(
        policies.filter((p) => matches(p.spec?.podSelector, labels)).map((p) => p.metadata?.name),
        workload.metadata?.name,
      ).toHaveLength(1);
    }
  });

  it("Redis takes connections from gateway pods only, on its port", () => {
    expect(REDIS).toBe(Number(new URL((config.affinity.store as RedisStoreConfig).url!).port));
    expect(admits(policies, gatewayP, redisP, REDIS)).toBe(true);
    for (const from of [otherPod, engineP, adminClient, elsewhere, prometheus])
      expect(admits(policies, from, redisP, REDIS), JSON.stringify(from.labels)).toBe(false);
  });

  it("the engines take connections from gateway pods and Prometheus only", () => {
    expect(config.discovery.map((d) => d.port)).toContain(ENGINE);
    expect(admits(policies, gatewayP, engineP, ENGINE)).toBe(true);
    expect(admits(policies, prometheus, engineP, ENGINE)).toBe(true);
    for (const from of [otherPod, redisP, elsewhere])
      expect(admits(policies, from, engineP, ENGINE), JSON.stringify(from.labels)).toBe(false);
  });

  it("the API port is open to everyone; the admin port only to admin-client pods of the namespace", () => {
    for (const from of [otherPod, elsewhere, prometheus, adminClient])
      expect(admits(policies, from, gatewayP, API)).toBe(true);
    expect(admits(policies, adminClient, gatewayP, ADMIN)).toBe(true);
    for (const from of [otherPod, elsewhere, prometheus, engineP])
      expect(admits(policies, from, gatewayP, ADMIN), JSON.stringify(from.labels)).toBe(false);
  });

  it("the evaluator does deny (control): without the policies, any pod reaches Redis and /admin", () => {
    expect(admits([], elsewhere, redisP, REDIS)).toBe(true);
    expect(admits([], otherPod, gatewayP, ADMIN)).toBe(true);
  });
});

describe("closed by default: client API keys from the agent-serve-api-keys Secret", () => {
  it("the gateway listens beyond loopback and refuses to start there without the Secret's keys", () => {
    const text = byName(base.configMaps, "agent-serve-config").data?.["gateway.yaml"] ?? "";
    const ref = gatewayContainer.env?.find((e) => e.name === "AGENT_SERVE_API_KEYS")?.valueFrom?.secretKeyRef;
    // Required (not optional): without the Secret the pod does not start at all.
    expect(ref).toEqual({ name: "agent-serve-api-keys", key: "sha256" });
    expect(config.server.host).toBe("0.0.0.0");
    expect(config.server.allow_open).toBe(false);
    expect(openExposureProblem(config)).toMatch(/no client API keys/);
    const hash = "ab".repeat(32);
    const keyed = parseConfigText(text, "gateway.yaml", { AGENT_SERVE_API_KEYS: `${hash}:team-a` });
    expect(keyed.server.api_keys).toEqual([{ sha256: hash, agent_id: "team-a" }]);
    expect(openExposureProblem(keyed)).toBeUndefined();
  });
});

describe("the Redis password from the agent-serve-redis Secret", () => {
  const envFrom = (container: IContainer, name: string) =>
    container.env?.find((e) => e.name === name)?.valueFrom?.secretKeyRef;

  it("Redis requires the Secret's password", () => {
    const args = redisContainer.args ?? [];
    const value = args[args.indexOf("--requirepass") + 1];
    expect(value).toBe("$(REDIS_PASSWORD)");
    expect(envFrom(redisContainer, "REDIS_PASSWORD")).toEqual({ name: "agent-serve-redis", key: "password" });
  });

  it("both gateway stores read it from the variable the Deployment fills from the same Secret key", () => {
    for (const store of [config.affinity.store, config.admission.store]) {
      expect(store.kind).toBe("redis");
      const redis = store as RedisStoreConfig;
      expect(redis.password_env).toBeDefined();
      const ref = envFrom(gatewayContainer, redis.password_env!);
      // Not optional: a replica without it would decide locally forever.
      expect(ref).toEqual({ name: "agent-serve-redis", key: "password" });
      // With the variable set (as the kubelet does), the store connects with that password.
      const env = { [redis.password_env!]: "from-the-secret" };
      expect(redisEnvProblems(redis, "store", env)).toEqual([]);
      expect(new URL(redisConnection(redis, env).url).password).toBe("from-the-secret");
      expect(redisEnvProblems(redis, "store", {})).toHaveLength(1);
    }
  });

  it("no password sits in the ConfigMap, and every Secret the base reads is created in the documented steps", () => {
    expect(byName(base.configMaps, "agent-serve-config").data?.["gateway.yaml"]).not.toMatch(
      /redis:\/\/[^@\s]*:[^@\s]*@/,
    );
    const doc = readFileSync(repoPath("docs/deployment.md"), "utf8");
    const refs = [...base.deployments, ...base.statefulSets].flatMap((w) =>
      podOf(w).containers.flatMap((c) => (c.env ?? []).flatMap((e) => e.valueFrom?.secretKeyRef ?? [])),
    );
    expect(refs.length).toBeGreaterThanOrEqual(3);
    for (const ref of refs) {
      expect(doc, `${ref.name}/${ref.key}`).toContain(
        `create secret generic ${ref.name} --from-literal=${ref.key}=`,
      );
    }
  });
});

describe("/admin on its own port and Service", () => {
  it("the config serves /admin on the container's admin port", () => {
    expect(config.server.admin_port).toBe(ADMIN);
    expect(ADMIN).not.toBe(API);
  });

  it("the agent-serve-admin Service reaches the admin port alone, inside the cluster; the API's Services never do", () => {
    const admin = byName(base.services, "agent-serve-admin");
    expect(admin.spec?.type ?? "ClusterIP").toBe("ClusterIP");
    expect(admin.spec?.ports?.map((p) => containerPort(gatewayContainer, p.targetPort))).toEqual([ADMIN]);
    for (const name of ["agent-serve", "agent-serve-metrics"]) {
      const service = byName(base.services, name);
      expect(service.spec?.ports?.map((p) => containerPort(gatewayContainer, p.targetPort))).not.toContain(
        ADMIN,
      );
    }
  });
});
