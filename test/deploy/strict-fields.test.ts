// Unknown fields in the manifests (a misspelt `readinesProbe` is silently dropped by the API server's default validation) are caught by TypeScript's excess-property check against kubernetes-models' types.
import { dirname, join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { BASE_DIR, repoPath } from "./base.js";
import { renderKustomization, type Manifest } from "./kustomize.js";

/*
 * The Kubernetes OpenAPI schemas (and so kubernetes-models' validate()) allow fields they do not define.
 * The models' TypeScript interfaces list exactly the defined fields, and an object literal assigned to
 * such an interface may not carry others. So each rendered object is written out as a typed literal and
 * compiled: any unknown or mistyped field is a compile error naming it.
 */
const TYPES: Record<string, { module: string; type: string }> = {
  "v1/ConfigMap": { module: "kubernetes-models/v1", type: "IConfigMap" },
  "v1/Service": { module: "kubernetes-models/v1", type: "IService" },
  "apps/v1/Deployment": { module: "kubernetes-models/apps/v1", type: "IDeployment" },
  "apps/v1/StatefulSet": { module: "kubernetes-models/apps/v1", type: "IStatefulSet" },
  "policy/v1/PodDisruptionBudget": { module: "kubernetes-models/policy/v1", type: "IPodDisruptionBudget" },
  "networking.k8s.io/v1/NetworkPolicy": {
    module: "kubernetes-models/networking.k8s.io/v1",
    type: "INetworkPolicy",
  },
};

/** The compiler's messages about `docs` written as typed literals (empty when every field is known). */
function typeErrors(docs: readonly Manifest[]): string[] {
  const lines: string[] = [];
  docs.forEach((doc, index) => {
    const key = `${doc.apiVersion}/${doc.kind}`;
    const target = TYPES[key];
    if (target === undefined) throw new Error(`${key}: no type for this kind`);
    lines.push(`import type { ${target.type} as T${index} } from "${target.module}";`);
    lines.push(`export const doc${index}: T${index} = ${JSON.stringify(doc)};`);
  });
  // Placed beside this test so that node_modules resolves as it does for the project.
  const fileName = join(dirname(repoPath("test/deploy/base.ts")), "__manifests__.ts");
  const source = lines.join("\n");
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (name) => (name === fileName ? source : readFile(name));
  host.fileExists = (name) => name === fileName || ts.sys.fileExists(name);
  host.getSourceFile = (name, language, ...rest) =>
    name === fileName ? ts.createSourceFile(name, source, language) : getSourceFile(name, language, ...rest);
  const program = ts.createProgram([fileName], options, host);
  const file = program.getSourceFile(fileName)!;
  return [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)].map((d) => {
    const where = d.start === undefined ? -1 : file.getLineAndCharacterOfPosition(d.start).line;
    const text = ts.flattenDiagnosticMessageText(d.messageText, " ");
    return `document ${Math.floor(where / 2)} (${docs[Math.floor(where / 2)]?.kind ?? "?"}): ${text}`;
  });
}

describe("every field of the rendered base is one Kubernetes defines", () => {
  it("compiles as typed kubernetes-models literals, where a misspelt field does not (control)", () => {
    const docs = renderKustomization(BASE_DIR);
    const misspelt = structuredClone(docs.find((d) => d.kind === "Deployment")!) as Manifest & {
      spec: { template: { spec: { containers: Record<string, unknown>[] } } };
    };
    const container = misspelt.spec.template.spec.containers[0]!;
    container["readinesProbe"] = container["readinessProbe"];
    delete container["readinessProbe"];
    // One compile for both (it takes seconds): the control is the last document.
    const errors = typeErrors([...docs, misspelt]);
    expect(errors.filter((e) => !e.startsWith(`document ${docs.length} `))).toEqual([]);
    expect(errors.join("\n")).toMatch(
      new RegExp(
        `^document ${docs.length} \\(Deployment\\): .*readinesProbe.* does not exist in type 'IContainer'`,
      ),
    );
  });
});
