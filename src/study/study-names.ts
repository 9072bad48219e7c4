// The studies `agent-serve study` runs, by name: listed by `agent-serve --help` without loading any study.
export const STUDY_NAMES = [
  "affinity",
  "saturation",
  "failure",
  "sessions",
  "hotspot",
  "sessionless",
  "replicas",
  "agents",
  "fairness",
  "kvevents",
] as const;

export type StudyName = (typeof STUDY_NAMES)[number];
