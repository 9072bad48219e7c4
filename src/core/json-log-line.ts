// The request's log line written whole (one JSON.stringify) into the destination of a pino logger made with pino's
// default line format, byte for byte the line pino would write.
//
// pino serialises a line key by key: it checks each key for serializers and escapes, and builds the line by
// concatenation (about 4 KB of garbage and 2 µs of CPU for the request line's 25 fields; bench/README.md, "Ninth
// round"). A logger the gateway made itself has no serializer, mixin, formatter, redaction or nested key that
// would change that line, so the hot line is serialised natively; every other logger gets logger.info.
import { pino, type Logger } from "pino";

const { chindingsSym, endSym, lsCacheSym, streamSym, timeSym } = pino.symbols;

/** Loggers made with pino's default line format (markDefaultFormat). */
const defaultFormat = new WeakSet<Logger>();

/**
 * Marks a logger whose lines are pino's default format: made by `pino({ name, level }, destination)` with no
 * other option. Returns it.
 */
export function markDefaultFormat(logger: Logger): Logger {
  defaultFormat.add(logger);
  return logger;
}

/** INFO's level number in pino. */
const INFO = 30;

/** logger.info(fields, message), the line written whole when the logger has the default format. */
export function logInfoLine(logger: Logger, fields: object, message: string): void {
  if (!defaultFormat.has(logger)) return void logger.info(fields, message);
  if (logger.levelVal > INFO) return;
  // Read at each line, as pino does: setBindings() may change the bindings.
  const own = logger as unknown as Record<symbol, unknown>;
  const members = JSON.stringify(fields);
  (own[streamSym] as { write(line: string): unknown }).write(
    (own[lsCacheSym] as Record<number, string>)[INFO]! +
      (own[timeSym] as () => string).call(logger) +
      (own[chindingsSym] as string) +
      (members.length > 2 ? `,${members.slice(1, -1)}` : "") +
      `,"msg":${JSON.stringify(message)}` +
      (own[endSym] as string),
  );
}
