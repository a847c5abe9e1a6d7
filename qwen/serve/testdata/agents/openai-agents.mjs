// The @openai/agents package (the OpenAI Agents SDK), on its default
// model provider: the Responses API.
import OpenAI from "openai";
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from "@openai/agents";
import { base, model, check, json, valid, turn, weatherParams, weatherZod, weatherPrompt, personSchema, personZod, personPrompt } from "./lib.mjs";

setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0 }));

const calls = [];
const weather = tool({
  name: "weather",
  description: "The forecast.",
  parameters: weatherZod,
  execute: async (args) => {
    calls.push(args);
    return `${args.city}: sunny for ${args.days} days`;
  },
});

// The demo model does not end a plain answer within its tokens, and the
// SDK takes a response cut by max_output_tokens as the model's failure:
// the plain turns check that it read the response (and the stream) to
// its end, the incomplete status the server gave.
async function incomplete(what, f) {
  try {
    await f();
  } catch (e) {
    check(/response\.incomplete/.test(e.message), `${what}: ${e.message}`);
    return;
  }
  throw new Error(`${what}: no error for a response cut by max_output_tokens`);
}
const brief = new Agent({ name: "plain", instructions: "Be brief.", model, modelSettings: { maxTokens: 16 } });
await turn("plain", () => incomplete("run", () => run(brief, "Hello.")));
await turn("forced tool call", async () => {
  const agent = new Agent({ name: "forecaster", instructions: "Use the tool.", model, tools: [weather],
    modelSettings: { toolChoice: "required", maxTokens: 300 }, toolUseBehavior: "stop_on_first_tool" });
  const r = await run(agent, weatherPrompt);
  check(calls.length > 0 && typeof r.finalOutput === "string" && r.finalOutput.includes("sunny"), `${json(r.finalOutput)}, calls ${json(calls)}`);
  for (const c of calls) valid(weatherParams, c, "arguments");
});
await turn("streamed", async () => {
  const s = await run(brief, "Hello.", { stream: true });
  let text = "", events = 0;
  await incomplete("stream", async () => {
    for await (const ev of s) {
      events++;
      if (ev.type === "raw_model_stream_event" && ev.data.type === "output_text_delta") text += ev.data.delta;
    }
    await s.completed;
    if (s.error) throw s.error;
  });
  check(events > 1, `${events} events`);
});
await turn("structured", async () => {
  const agent = new Agent({ name: "person", instructions: "Answer as JSON.", model, outputType: personZod, modelSettings: { maxTokens: 300 } });
  const r = await run(agent, personPrompt);
  valid(personSchema, r.finalOutput, "finalOutput");
});
console.log("ok");
