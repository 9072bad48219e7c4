// What a route receipt costs per request: the conversation fingerprint of bodies of growing length, the rules,
// and a whole turn's receipt in process (begin: key and fingerprint, the previous turn read from the in-process
// memory; settle: rules, record and memory write), over 1,000 sessions in turn.
// node --import tsx bench/receipts/fingerprint.ts
import { fingerprintOf } from "../../src/receipts/fingerprint.js";
import { InMemoryReceipts } from "../../src/receipts/receipt-memory.js";
import { receiptOf, turnRecordOf } from "../../src/receipts/receipt-rules.js";
import { TurnReceipts } from "../../src/receipts/turn-receipts.js";

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
  for (let i = 0; i < Math.min(iterations, 20_000); i++) run(); // warm-up
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
  const receipts = new TurnReceipts(
    new InMemoryReceipts(10_000, 3_600_000, () => 0),
    { blockTokens: 16 },
    () => 0,
  );
  const request = { endpoint: "chat" as const, body, prefixKey: undefined };
  let turn = 0;
  const turnUs = timeUs(() => {
    const pending = receipts.begin(`session-${turn++ % 1000}`, request)!;
    pending.settle({ promptTokens: 1000, completionTokens: 50, cachedTokens: 992 }, placement, undefined);
  }, 5000);
  console.log(
    `${String(body["messages"] && (body["messages"] as unknown[]).length).padStart(4)} messages, ${bytes} bytes: ` +
      `fingerprint ${fingerprintUs.toFixed(2)} us, rules ${rulesUs.toFixed(3)} us, whole turn ${turnUs.toFixed(2)} us ` +
      `(JSON.parse of the body ${parseUs.toFixed(1)} us)`,
  );
}
