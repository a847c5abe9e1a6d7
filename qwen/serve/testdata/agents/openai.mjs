// The openai package: chat completions and the Responses API.
import OpenAI from "openai";
import { base, model, check, json, valid, parsed, turn, weatherParams, weatherPrompt, personSchema, personPrompt } from "./lib.mjs";

const openai = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0 });
const tools = [{ type: "function", function: { name: "weather", description: "The forecast.", parameters: weatherParams, strict: true } }];

await turn("chat plain", async () => {
  const c = await openai.chat.completions.create({ model, messages: [{ role: "user", content: "Hello." }], max_tokens: 16 });
  check(c.object === "chat.completion" && typeof c.choices[0].message.content === "string" && ["stop", "length"].includes(c.choices[0].finish_reason), json(c));
});
await turn("chat forced tool call", async () => {
  const c = await openai.chat.completions.create({ model, messages: [{ role: "user", content: weatherPrompt }], tools, tool_choice: "required", max_tokens: 300 });
  check(c.choices[0].finish_reason === "tool_calls" && c.choices[0].message.tool_calls?.length > 0, json(c));
  for (const call of c.choices[0].message.tool_calls) {
    check(call.function.name === "weather", json(call));
    parsed(weatherParams, call.function.arguments, "arguments");
  }
});
await turn("chat streamed", async () => {
  const s = openai.chat.completions.stream({ model, messages: [{ role: "user", content: "Hello." }], max_tokens: 16, temperature: 0, stream_options: { include_usage: true } });
  let text = "";
  s.on("content", (d) => { text += d; });
  const c = await s.finalChatCompletion();
  check(c.choices[0].message.content === text && c.usage.completion_tokens > 0, `${json(c)}, deltas ${json(text)}`);
});
await turn("chat structured", async () => {
  const c = await openai.chat.completions.create({ model, messages: [{ role: "user", content: personPrompt }], max_tokens: 300,
    response_format: { type: "json_schema", json_schema: { name: "person", schema: personSchema, strict: true } } });
  check(c.choices[0].finish_reason === "stop", json(c));
  parsed(personSchema, c.choices[0].message.content, "content");
});

const rtools = [{ type: "function", name: "weather", description: "The forecast.", parameters: weatherParams, strict: true }];
await turn("responses plain", async () => {
  const r = await openai.responses.create({ model, input: "Hello.", max_output_tokens: 16 });
  check(r.object === "response" && ["completed", "incomplete"].includes(r.status) && typeof r.output_text === "string", json(r));
});
await turn("responses forced tool call", async () => {
  const r = await openai.responses.create({ model, input: weatherPrompt, tools: rtools, tool_choice: "required", max_output_tokens: 300 });
  const calls = r.output.filter((i) => i.type === "function_call");
  check(r.status === "completed" && calls.length > 0, json(r));
  for (const c of calls) parsed(weatherParams, c.arguments, "arguments");
});
await turn("responses streamed", async () => {
  const s = openai.responses.stream({ model, input: "Hello.", max_output_tokens: 16 });
  const types = [];
  s.on("event", (ev) => types.push(ev.type));
  const r = await s.finalResponse();
  check(types[0] === "response.created" && ["response.completed", "response.incomplete"].includes(types.at(-1)), `events ${types}`);
  check(typeof r.output_text === "string", json(r));
});
await turn("responses structured", async () => {
  const r = await openai.responses.create({ model, input: personPrompt, max_output_tokens: 300,
    text: { format: { type: "json_schema", name: "person", schema: personSchema, strict: true } } });
  check(r.status === "completed", json(r));
  parsed(personSchema, r.output_text, "output_text");
});
console.log("ok");
