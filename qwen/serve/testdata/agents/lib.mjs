// What the agent-SDK scripts share: the checks, a tool and a schema
// small enough for the bundled demo model, and the arguments every
// script takes: node SCRIPT.mjs BASE_URL MODEL (the server, or the
// recording proxy in front of it). Each script makes the four turns of
// make test-agents: a plain one, a forced tool call, a streamed one and
// a structured answer (where the client has them), and prints ok last.
// The demo model is a small Qwen3 trained on Go source: what it writes
// is Go-like text that seldom ends by itself, so plain turns are bounded
// by their tokens and their text is not checked; forced calls and
// structured answers are what the grammar holds, so they are. The plain
// and streamed turns, which check that tokens were generated, are
// greedy: sampled, Qwen3.5's demo model ends its answer at its first
// token about one time in fifteen ("Hello." opens its thinking on Go
// text), which is an answer, but of no tokens.
import Ajv from "ajv";
import addFormats from "ajv-formats";
import { z } from "zod";

export const [base, model] = process.argv.slice(2);
if (!base || !model) throw new Error("usage: node SCRIPT.mjs BASE_URL MODEL");

const ajv = new Ajv({ strict: false });
addFormats(ajv);

export function check(ok, what) {
  if (!ok) throw new Error(what);
}
export const json = (v) => JSON.stringify(v);
export function valid(schema, value, what) {
  const v = ajv.compile(schema);
  check(v(value), `${what}: ${json(value)} is invalid: ${ajv.errorsText(v.errors)}`);
}
// parsed is text that must be JSON valid for schema.
export function parsed(schema, text, what) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`${what}: ${json(text)} is not JSON: ${e.message}`);
  }
  valid(schema, v, what);
  return v;
}

// The forecast tool, as JSON Schema and as zod.
export const weatherParams = {
  type: "object",
  properties: { city: { type: "string", enum: ["Paris", "Oslo"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
};
export const weatherZod = z.object({ city: z.enum(["Paris", "Oslo"]), days: z.number().int().min(1).max(7) });
export const weatherPrompt = "What is the weather in Paris for the next 3 days? Use the weather tool.";

// A person, as JSON Schema and as zod.
export const personSchema = {
  type: "object",
  properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer", minimum: 0, maximum: 120 } },
  required: ["name", "age"],
  additionalProperties: false,
};
export const personZod = z.object({ name: z.string().max(8), age: z.number().int().min(0).max(120) });
export const personPrompt = "Invent a person: a name and an age, as JSON.";

// turn runs one named turn, saying which failed.
export async function turn(name, f) {
  try {
    await f();
  } catch (e) {
    e.message = `${name}: ${e.message}`;
    throw e;
  }
  console.log(`${name}: ok`);
}
