// Test fixture: the rendered deploy/kubernetes base, validated against the Kubernetes schemas, with typed accessors for the cross-reference checks.
import { fileURLToPath } from "node:url";
import { ConfigMap, Service, type IConfigMap, type IService, type IContainer } from "kubernetes-models/v1";
import { Deployment, StatefulSet, type IDeployment, type IStatefulSet } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget, type IPodDisruptionBudget } from "kubernetes-models/policy/v1";
import { NetworkPolicy, type INetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { renderKustomization, type Manifest } from "./kustomize.js";

export const repoPath = (relative: string): string =>
  fileURLToPath(new URL(`../../${relative}`, import.meta.url));

export const BASE_DIR = repoPath("deploy/kubernetes");

/*
 * Every kind the base may contain, with the kubernetes-models class whose validate() checks an object
 * against the Kubernetes OpenAPI schema of that kind (types, required fields, enums, formats, int-or-
 * string). A kind missing here fails the test: add its class rather than leave an object unchecked.
 */
const VALIDATORS: Record<string, (doc: Manifest) => void> = {
  "v1/ConfigMap": (doc) => new ConfigMap(doc as unknown as IConfigMap).validate(),
  "v1/Service": (doc) => new Service(doc as unknown as IService).validate(),
  "apps/v1/Deployment": (doc) => new Deployment(doc as unknown as IDeployment).validate(),
  "apps/v1/StatefulSet": (doc) => new StatefulSet(doc as unknown as IStatefulSet).validate(),
  "policy/v1/PodDisruptionBudget": (doc) =>
    new PodDisruptionBudget(doc as unknown as IPodDisruptionBudget).validate(),
  "networking.k8s.io/v1/NetworkPolicy": (doc) =>
    new NetworkPolicy(doc as unknown as INetworkPolicy).validate(),
};

/** Throws (with the schema's messages) unless `doc` is a valid object of a kind the base may hold. */
export function validateManifest(doc: Manifest): void {
  const key = `${doc.apiVersion}/${doc.kind}`;
  const validate = VALIDATORS[key];
  if (validate === undefined)
    throw new Error(`${key} ${doc.metadata.name}: no schema validator for this kind`);
  validate(doc);
}

export interface RenderedBase {
  all: Manifest[];
  deployments: IDeployment[];
  statefulSets: IStatefulSet[];
  services: IService[];
  configMaps: IConfigMap[];
  pdbs: IPodDisruptionBudget[];
  networkPolicies: INetworkPolicy[];
}

/** The base rendered and every object validated; then typed views (safe only after validation). */
export function renderBase(dir = BASE_DIR): RenderedBase {
  const all = renderKustomization(dir);
  for (const doc of all) validateManifest(doc);
  const ofKind = <T>(kind: string): T[] => all.filter((d) => d.kind === kind) as unknown as T[];
  return {
    all,
    deployments: ofKind<IDeployment>("Deployment"),
    statefulSets: ofKind<IStatefulSet>("StatefulSet"),
    services: ofKind<IService>("Service"),
    configMaps: ofKind<IConfigMap>("ConfigMap"),
    pdbs: ofKind<IPodDisruptionBudget>("PodDisruptionBudget"),
    networkPolicies: ofKind<INetworkPolicy>("NetworkPolicy"),
  };
}

export function byName<T extends { metadata?: { name?: string } }>(list: readonly T[], name: string): T {
  const found = list.find((item) => item.metadata?.name === name);
  if (found === undefined) throw new Error(`no object named ${name}`);
  return found;
}

/** A workload's pod template labels, containers and volumes. */
export function podOf(workload: IDeployment | IStatefulSet) {
  const template = workload.spec?.template;
  const containers = template?.spec?.containers ?? [];
  return {
    labels: template?.metadata?.labels ?? {},
    annotations: template?.metadata?.annotations ?? {},
    spec: template?.spec,
    containers,
    volumes: template?.spec?.volumes ?? [],
  };
}

/** Does the label selector `selector` pick a pod with `labels`? */
export function selects(
  selector: Record<string, string> | undefined,
  labels: Record<string, string>,
): boolean {
  if (selector === undefined || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

/** The container port a probe's or Service's port (a number or a port name) means, or undefined. */
export function containerPort(container: IContainer, port: number | string | undefined): number | undefined {
  if (port === undefined) return undefined;
  const ports = container.ports ?? [];
  const found =
    typeof port === "number"
      ? ports.find((p) => p.containerPort === port)
      : ports.find((p) => p.name === port);
  return found?.containerPort;
}
