// What the demo agents are asked, turn by turn: tasks that need the workspace, the corpus, sums and code.

export const SYSTEM_PROMPT =
  "You are a careful engineering assistant working on a small project. Plan before you act, use the tools " +
  "for facts you do not have (read_file for the project's files, search_corpus for background articles, " +
  "calculator for arithmetic, run_javascript for anything that needs a program), then answer briefly and " +
  "say which tool results your answer rests on.";

const TASKS: readonly string[] = [
  "Read README.md in the workspace and tell me in two sentences what the project does.",
  "Search the corpus for how prefix caching saves prefill work and summarise it for a new teammate.",
  "The notes say each engine holds 48000 KV blocks of 16 tokens. How many tokens is that, and how many " +
    "4096-token conversations fit at once? Use the calculator.",
  "Write JavaScript that prints the first 20 Fibonacci numbers and their sum, run it, and report the sum.",
  "Read data/latencies.csv and compute the mean and the largest TTFT with a short program.",
  "Search the corpus for rendezvous hashing and explain why adding an engine moves few sessions.",
  "Read notes/capacity-plan.md and check its arithmetic for the weekly token estimate with the calculator.",
  "Summarise what you learned in this session as three bullet points for the project's changelog.",
  "Search the corpus for continuous batching, then read notes/meeting-2026-11-20.md: which open question " +
    "does the article answer?",
  "Run a program that sorts the words of the sentence 'agents reuse their prefix when they stay put' by " +
    "length and prints them.",
];

/** The user message of `turn` (1-based) for agent `agentIndex` (0-based): agents start at different tasks. */
export function taskFor(agentIndex: number, turn: number): string {
  return TASKS[(agentIndex * 3 + turn - 1) % TASKS.length]!;
}

export const TASK_COUNT = TASKS.length;
