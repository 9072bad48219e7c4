// The continuation tests' way of feeding a relay: engine bytes split anywhere, what it sends the client joined.

/** Everything the relay sends for these engine bytes, pushed in pieces of `step` bytes (split anywhere). */
export function pushAll(relay: { push(b: Buffer): Buffer[] }, text: string, step = 7): string {
  const bytes = Buffer.from(text);
  let out = "";
  for (let at = 0; at < bytes.length; at += step)
    out += Buffer.concat(relay.push(bytes.subarray(at, at + step))).toString();
  return out;
}
