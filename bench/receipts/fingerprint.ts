// What a route receipt costs per request: the conversation fingerprint of bodies of growing length, and the rules.
// node --import tsx bench/receipts/fingerprint.ts
import { fingerprintOf } from "../../src/receipts/fingerprint.js";
import { receiptOf, turnRecordOf } from "../../src/receipts/receipt-rules.js";

function conversation(turns: number, toolOutputChars: number): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [
    {
      role: "system",
      content: "You are a coding agent. Tools: read_file, write_file, run_tests. ".repeat(40),
    },
  ];
  for (let i = 0; i < turns; i++) {
    messages.push({ role: "user", content: `step ${i}: run the tests and fix what fails` });
    messages.push({
      role: "assistant",
      content: null,
      tool_calls: [{ id: `c${i}`, type: "function", function: { name: "run_tests", arguments: "{}" } }],
    });
    messages.push({ role: "tool", tool_call_id: `c${i}`, content: "x".repeat(toolOutputChars) });
  }
  return { model: "m", messages, stream: true, max_tokens: 256 };
}

function timeUs(run: () => void, iterations: number): number {
  for (let i = 0; i < Math.min(iterations, 2000); i++) run(); // warm-up
  const started = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) run();
  return Number(process.hrtime.bigint() - started) / 1000 / iterations;
}

for (const [turns, chars] of [
  [1, 200],
  [10, 2000],
  [50, 8000],
] as const) {
  const body = conversation(turns, chars);
  const bytes = JSON.stringify(body).length;
  const parseUs =
    timeUs(() => JSON.parse(JSON.stringify(body)) as unknown, 2000) -
    timeUs(() => JSON.stringify(body), 2000);
  const fingerprintUs = timeUs(() => fingerprintOf("chat", body), 5000);
  const fp = fingerprintOf("chat", body)!;
  const placement = { backendId: "a", tier: "small", reason: "affinity_hit" };
  const previous = turnRecordOf(fp, { promptTokens: 1000, completionTokens: 50 }, placement, undefined, 0);
  const rulesUs = timeUs(() => receiptOf(previous, fp, placement, 1024, 16, 1), 100_000);
  console.log(
    `${String(body["messages"] && (body["messages"] as unknown[]).length).padStart(4)} messages, ${bytes} bytes: ` +
      `fingerprint ${fingerprintUs.toFixed(2)} us, rules ${rulesUs.toFixed(3)} us (JSON.parse of the body ${parseUs.toFixed(1)} us)`,
  );
}
