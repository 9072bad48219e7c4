// What a study produces: records, tables, charts and checked claims, which the report writer renders.
import type { RequestRecord } from "./session-runner.js";

export interface Check {
  claim: string;
  passed: boolean;
  detail: string;
}

export interface Table {
  title: string;
  columns: string[];
  rows: (string | number)[][];
}

export interface Chart {
  /** File name inside the run directory, e.g. "hit-rates.svg". */
  file: string;
  caption: string;
  svg: string;
}

export interface StudyResult {
  study: string;
  title: string;
  description: string;
  /** What the study found, in a sentence or two, whichever way it came out: leads the report and the terminal. */
  verdict?: string;
  seed: number;
  timeScale: number;
  /** The gateway config(s) used, for the config hash in summary.json. */
  configs: unknown[];
  records: RequestRecord[];
  tables: Table[];
  charts: Chart[];
  checks: Check[];
  notes: string[];
  /** Machine-readable per-condition numbers for summary.json. */
  data: Record<string, unknown>;
}
