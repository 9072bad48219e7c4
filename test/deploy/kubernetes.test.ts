// deploy/kubernetes renders to valid Kubernetes objects whose cross-references hold: selectors, ports, probes, mounts, PDB, scraping.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import type { IContainer } from "kubernetes-models/v1";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { findExecutable, promtool, requiredTool } from "../observability/prometheus.js";
import {
  BASE_DIR,
  byName,
  containerPort,
  podOf,
  renderBase,
  repoPath,
  selects,
  validateManifest,
} from "./base.js";
import {
  KustomizeError,
  manifestId,
  parseManifests,
  renderKustomization,
  type Manifest,
} from "./kustomize.js";

const base = renderBase();
// Everything lives in the namespace the gateway config's DNS names use (gateway-config.test.ts checks those).
const NAMESPACE = "agent-serve";
const gateway = byName(base.deployments, "agent-serve");
const gatewayPod = podOf(gateway);
const gatewayContainer = gatewayPod.containers[0]!;
const workloads = [...base.deployments, ...base.statefulSets];

/** The value after `flag` in a container's args. */
function argAfter(container: IContainer, flag: string): string | undefined {
  const args = container.args ?? [];
  const index = args.indexOf(flag);
  return index < 0 ? undefined : args[index + 1];
}

describe("the rendered base", () => {
  it("holds the gateway, its Services, PDB and config, Redis and the example engines, all in one namespace", () => {
    expect(base.all.map((m) => `${m.kind}/${m.metadata.name}`).sort()).toEqual(
      [
        "ConfigMap/agent-serve-config",
        "Deployment/agent-serve",
        "NetworkPolicy/agent-serve",
        "NetworkPolicy/redis",
        "NetworkPolicy/vllm",
        "PodDisruptionBudget/agent-serve",
        "Service/agent-serve",
        "Service/agent-serve-admin",
        "Service/agent-serve-metrics",
        "Service/redis",
        "Service/vllm-small",
        "StatefulSet/redis",
        "StatefulSet/vllm-small",
      ].sort(),
    );
    for (const m of base.all) expect(m.metadata.namespace, manifestId(m)).toBe(NAMESPACE);
  });

  it("is checked by a schema validator that does reject bad objects (control)", () => {
    const broken = structuredClone(base.all.find((m) => m.kind === "Deployment")!) as Manifest & {
      spec: {
        replicas: unknown;
        template: { spec: { containers: { ports: { containerPort: unknown }[] }[] } };
      };
    };
    broken.spec.replicas = "3";
    broken.spec.template.spec.containers[0]!.ports[0]!.containerPort = "http";
    expect(() => validateManifest(broken)).toThrow(/spec\/replicas must be integer/);
    expect(() => validateManifest(broken)).toThrow(/containers\/0\/ports\/0\/containerPort must be integer/);
    expect(() => validateManifest({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" } })).toThrow(
      /no schema validator/,
    );
  });

  it("is rendered by a renderer that refuses kustomization fields it does not implement (control)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "agent-serve-kustomize-"));
    try {
      await writeFile(join(dir, "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
      await writeFile(
        join(dir, "kustomization.yaml"),
        "kind: Kustomization\nresources: [cm.yaml]\nimages: [{name: a, newTag: b}]\n",
      );
      expect(() => renderKustomization(dir)).toThrow(KustomizeError);
      await writeFile(
        join(dir, "kustomization.yaml"),
        "kind: Kustomization\nresources: [cm.yaml, cm.yaml]\n",
      );
      expect(() => renderKustomization(dir)).toThrow(/same id/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  // kubectl embeds kustomize. It is on some machines only (.ci/run does not install it): optional check.
  const kubectl = findExecutable("kubectl");
  it.skipIf(kubectl === undefined)(
    "renders exactly as `kubectl kustomize` does (where kubectl is installed)",
    () => {
      const result = spawnSync(kubectl!, ["kustomize", BASE_DIR], { encoding: "utf8", timeout: 60_000 });
      expect(result.status, result.stderr).toBe(0);
      const sorted = (list: Manifest[]) =>
        [...list].sort((a, b) => manifestId(a).localeCompare(manifestId(b)));
      expect(sorted(parseManifests(result.stdout, "kubectl kustomize"))).toEqual(
        sorted(renderKustomization(BASE_DIR)),
      );
    },
  );
});

describe("the gateway Deployment", () => {
  it("runs three replicas, rolled one at a time without losing capacity", () => {
    expect(gateway.spec?.replicas).toBe(3);
    expect(gateway.spec?.strategy?.rollingUpdate).toMatchObject({ maxUnavailable: 0, maxSurge: 1 });
    expect(selects(gateway.spec?.selector.matchLabels, gatewayPod.labels)).toBe(true);
  });

  it("probes readiness on /readyz and liveness on /healthz, on the container's port", () => {
    const port = gatewayContainer.ports?.[0]?.containerPort;
    expect(port).toBe(8000);
    expect(gatewayContainer.readinessProbe?.httpGet?.path).toBe("/readyz");
    expect(gatewayContainer.livenessProbe?.httpGet?.path).toBe("/healthz");
    expect(containerPort(gatewayContainer, gatewayContainer.readinessProbe?.httpGet?.port)).toBe(port);
    expect(containerPort(gatewayContainer, gatewayContainer.livenessProbe?.httpGet?.port)).toBe(port);
  });

  it("sleeps in preStop, so endpoints are gone before SIGTERM", () => {
    const command = gatewayContainer.lifecycle?.preStop?.exec?.command ?? [];
    expect(command[0]).toBe("/bin/sleep");
    expect(Number(command[1])).toBeGreaterThanOrEqual(5);
  });

  it("runs as non-root on a read-only root filesystem with every capability dropped", () => {
    expect(gatewayPod.spec?.securityContext?.runAsNonRoot).toBe(true);
    expect(gatewayPod.spec?.securityContext?.runAsUser).toBeGreaterThan(0);
    expect(gatewayContainer.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
    });
    expect(gatewayPod.spec?.automountServiceAccountToken).toBe(false);
  });

  it("requests and limits CPU and memory, with a heap cap below the memory limit", () => {
    const resources = gatewayContainer.resources;
    for (const key of ["cpu", "memory"]) {
      expect(resources?.requests?.[key], `requests.${key}`).toBeDefined();
      expect(resources?.limits?.[key], `limits.${key}`).toBeDefined();
    }
    const heapMb = Number(
      /--max-old-space-size=(\d+)/.exec(
        gatewayContainer.env?.find((e) => e.name === "NODE_OPTIONS")?.value ?? "",
      )?.[1],
    );
    expect(resources?.limits?.["memory"]).toBe("1Gi");
    expect(heapMb).toBeLessThan(1024);
  });

  it("mounts the ConfigMap's gateway.yaml where its args read the config", () => {
    const configPath = argAfter(gatewayContainer, "--config")!;
    expect(gatewayContainer.args?.[0]).toBe("gateway");
    const mount = gatewayContainer.volumeMounts?.find((m) => m.mountPath === posix.dirname(configPath));
    expect(mount, `a volume mounted at ${posix.dirname(configPath)}`).toBeDefined();
    // No subPath: kubelet refreshes the file when the ConfigMap changes, and SIGHUP reloads it.
    expect(mount?.subPath).toBeUndefined();
    const volume = gatewayPod.volumes.find((v) => v.name === mount?.name);
    const configMap = byName(base.configMaps, volume?.configMap?.name ?? "(no configMap volume)");
    expect(Object.keys(configMap.data ?? {})).toContain(posix.basename(configPath));
  });

  it("gets no service links: the agent-serve Service would set AGENT_SERVE_PORT, which the gateway reads", () => {
    // Kubernetes sets NAME_PORT=tcp://ip:port for every Service in the namespace (NAME upper-cased, - to _).
    const injected = base.services.map((s) => `${s.metadata!.name!.toUpperCase().replace(/-/g, "_")}_PORT`);
    expect(injected).toContain("AGENT_SERVE_PORT");
    expect(gatewayPod.spec?.enableServiceLinks).toBe(false);
  });

  it("asks Prometheus to scrape /metrics on its own port", () => {
    expect(gatewayPod.annotations["prometheus.io/scrape"]).toBe("true");
    expect(gatewayPod.annotations["prometheus.io/path"]).toBe("/metrics");
    expect(containerPort(gatewayContainer, Number(gatewayPod.annotations["prometheus.io/port"]))).toBe(8000);
  });
});

describe("cross-references between the objects", () => {
  it("every workload's selector picks its own pods", () => {
    for (const w of workloads)
      expect(selects(w.spec?.selector.matchLabels, podOf(w).labels), w.metadata?.name).toBe(true);
  });

  it("every Service selects the pods of exactly one workload, and its target ports are container ports there", () => {
    for (const service of base.services) {
      const name = service.metadata!.name!;
      const picked = workloads.filter((w) => selects(service.spec?.selector, podOf(w).labels));
      expect(
        picked.map((w) => w.metadata?.name),
        name,
      ).toHaveLength(1);
      const containers = podOf(picked[0]!).containers;
      for (const port of service.spec?.ports ?? []) {
        const target = port.targetPort ?? port.port;
        const resolved = containers.map((c) => containerPort(c, target)).find((p) => p !== undefined);
        expect(resolved, `${name} port ${port.name ?? port.port} -> ${String(target)}`).toBeDefined();
      }
    }
  });

  it("every probe targets a port of its container", () => {
    for (const w of workloads) {
      for (const c of podOf(w).containers) {
        for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
          if (probe === undefined) continue;
          const port = probe.httpGet?.port ?? probe.tcpSocket?.port;
          expect(
            containerPort(c, port),
            `${w.metadata?.name}/${c.name} probe port ${String(port)}`,
          ).toBeDefined();
        }
        expect(c.readinessProbe, `${w.metadata?.name}/${c.name} has a readiness probe`).toBeDefined();
      }
    }
  });

  it("every StatefulSet is governed by a headless Service that selects its pods", () => {
    for (const set of base.statefulSets) {
      const service = byName(base.services, set.spec!.serviceName!);
      expect(service.spec?.clusterIP, service.metadata?.name).toBe("None");
      expect(selects(service.spec?.selector, podOf(set).labels)).toBe(true);
    }
  });

  it("the PodDisruptionBudget covers the gateway pods only, and lets a drain proceed", () => {
    const pdb = byName(base.pdbs, "agent-serve");
    const covered = workloads.filter((w) => selects(pdb.spec?.selector?.matchLabels, podOf(w).labels));
    expect(covered.map((w) => w.metadata?.name)).toEqual(["agent-serve"]);
    expect(pdb.spec?.maxUnavailable).toBe(1);
    expect(pdb.spec?.minAvailable).toBeUndefined();
  });

  it("the vLLM engines serve with prefix caching on one GPU each, unready pods left out of DNS", () => {
    const engines = byName(base.statefulSets, "vllm-small");
    const vllm = podOf(engines).containers[0]!;
    expect(vllm.command).toEqual(["vllm", "serve"]);
    expect(vllm.args).toContain("--enable-prefix-caching");
    expect(vllm.resources?.requests?.["nvidia.com/gpu"]).toBe(1);
    expect(vllm.resources?.limits?.["nvidia.com/gpu"]).toBe(1);
    expect(vllm.readinessProbe?.httpGet?.path).toBe("/health");
    expect(byName(base.services, "vllm-small").spec?.publishNotReadyAddresses).toBe(false);
  });

  it("Redis runs as non-root with its data on a volume claim", () => {
    const redis = byName(base.statefulSets, "redis");
    const pod = podOf(redis);
    expect(pod.spec?.securityContext?.runAsNonRoot).toBe(true);
    expect(pod.containers[0]!.securityContext?.readOnlyRootFilesystem).toBe(true);
    const dataMount = pod.containers[0]!.volumeMounts?.find((m) => m.mountPath === "/data");
    expect(redis.spec?.volumeClaimTemplates?.map((t) => t.metadata?.name)).toContain(dataMount?.name);
    expect(argAfter(pod.containers[0]!, "--dir")).toBe("/data");
  });
});

describe("the Prometheus example (deploy/kubernetes/examples/prometheus-scrape.yml)", () => {
  const path = repoPath("deploy/kubernetes/examples/prometheus-scrape.yml");
  const tool = requiredTool("promtool");

  it.skipIf(tool.skip)("passes promtool check config", () => {
    if (tool.path === undefined) throw new Error(tool.missing);
    const checked = promtool(tool.path, ["check", "config", path]);
    expect(checked.status, checked.output).toBe(0);
  });

  it("names headless Services of the base and their ports; the gateway's includes unready pods", () => {
    interface Job {
      job_name: string;
      dns_sd_configs: { names: string[]; type: string; port: number }[];
      relabel_configs?: { target_label: string; replacement: string }[];
    }
    const config = parseYaml(readFileSync(path, "utf8")) as { scrape_configs: Job[] };
    const suffix = `.${NAMESPACE}.svc.cluster.local`;
    const scraped: string[] = [];
    for (const job of config.scrape_configs) {
      for (const sd of job.dns_sd_configs) {
        for (const name of sd.names) {
          expect(name.endsWith(suffix), name).toBe(true);
          const service = byName(base.services, name.slice(0, -suffix.length));
          expect(service.spec?.clusterIP).toBe("None");
          expect(service.spec?.ports?.map((p) => p.port)).toContain(sd.port);
          scraped.push(service.metadata!.name!);
          // A job that labels its targets with a tier names the tier of the pods it scrapes.
          const tier = job.relabel_configs?.find((r) => r.target_label === "tier")?.replacement;
          const pods = workloads.filter((w) => selects(service.spec?.selector, podOf(w).labels));
          if (tier !== undefined)
            expect(pods.map((w) => podOf(w).labels["agent-serve/tier"])).toEqual([tier]);
        }
      }
    }
    expect(scraped.sort()).toEqual(["agent-serve-metrics", "vllm-small"]);
    expect(byName(base.services, "agent-serve-metrics").spec?.publishNotReadyAddresses).toBe(true);
  });
});
