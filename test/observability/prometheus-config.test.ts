// configs/prometheus.yml passes `promtool check config` and scrapes exactly the default deployment of
// configs/gateway.yaml: the gateway's port, and every engine with the backend and tier labels the dashboard
// joins on.
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseConfigText } from "../../src/config/load.js";
import { readYaml, repoFile } from "./grafana-dashboard.js";
import { promtool, requiredTool } from "./prometheus.js";

const PROMETHEUS_CONFIG = repoFile("configs/prometheus.yml");
const tool = requiredTool("promtool");

interface ScrapeConfig {
  job_name: string;
  metrics_path?: string;
  static_configs: { targets: string[]; labels?: Record<string, string> }[];
}

describe("configs/prometheus.yml", () => {
  it.skipIf(tool.skip)("passes promtool check config (and promtool does reject a broken one)", async () => {
    if (tool.path === undefined) throw new Error(tool.missing);
    const checked = promtool(tool.path, ["check", "config", PROMETHEUS_CONFIG]);
    expect(checked.output).toContain("SUCCESS");
    expect(checked.status, checked.output).toBe(0);

    const dir = await mkdtemp(join(tmpdir(), "agent-serve-promtool-"));
    try {
      const broken = join(dir, "broken.yml");
      await writeFile(broken, "global:\n  scrape_interval: 5s\n  scrape_timeout: 10s\n");
      expect(promtool(tool.path, ["check", "config", broken]).status).not.toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("scrapes the gateway and every engine of configs/gateway.yaml, labelled with their backend and tier", () => {
    const gatewayFile = repoFile("configs/gateway.yaml");
    const gateway = parseConfigText(readFileSync(gatewayFile, "utf8"), gatewayFile);
    const config = readYaml(PROMETHEUS_CONFIG) as { scrape_configs: ScrapeConfig[] };
    const jobs = new Map(config.scrape_configs.map((job) => [job.job_name, job]));
    expect([...jobs.keys()]).toEqual(["agent-serve", "vllm"]);

    const gatewayJob = jobs.get("agent-serve")!;
    expect(gatewayJob.static_configs.flatMap((g) => g.targets)).toEqual([`127.0.0.1:${gateway.server.port}`]);

    const engines = jobs
      .get("vllm")!
      .static_configs.flatMap((group) =>
        group.targets.map((target) => ({ target, labels: group.labels ?? {} })),
      );
    expect(engines).toEqual(
      gateway.backends.map((backend) => ({
        target: new URL(backend.base_url).host,
        labels: { backend: backend.id, tier: backend.tier },
      })),
    );
    for (const job of jobs.values()) expect(job.metrics_path ?? "/metrics").toBe("/metrics");
  });
});
