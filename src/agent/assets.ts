// Where the agent's bundled workspace and corpus live, from source (tsx) and compiled (dist/) alike.
import { fileURLToPath } from "node:url";

/** src/agent/*.ts sits two levels under the repository root; dist/src/agent/*.js three. */
const ROOT = new URL(import.meta.url.endsWith(".ts") ? "../../" : "../../../", import.meta.url);

export const WORKSPACE_DIR = fileURLToPath(new URL("assets/agent-workspace/", ROOT));
export const CORPUS_DIR = fileURLToPath(new URL("assets/agent-corpus/", ROOT));
