// Structured output (`response_format`): the JSON text guided decoding would make the model write.
import type { Random } from "../core/random.js";
import type { OutputFormat } from "../surface/output-format.js";
import { pythonJson, valueForSchema } from "./json-schema-values.js";

export { TEXT_FORMAT, parseOutputFormat, type OutputFormat } from "../surface/output-format.js";

/** The JSON text of a structured reply, or undefined for free text. */
export function structuredText(format: OutputFormat, random: Random): string | undefined {
  if (format.kind === "text") return undefined;
  const schema = format.kind === "json_schema" ? format.schema : { type: "object" };
  return pythonJson(valueForSchema(schema, random));
}
