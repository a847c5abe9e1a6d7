// The @anthropic-ai/sdk package: messages.
import Anthropic from "@anthropic-ai/sdk";
import { base, model, check, json, valid, parsed, turn, weatherParams, weatherPrompt, personSchema, personPrompt } from "./lib.mjs";

const anthropic = new Anthropic({ baseURL: base, apiKey: "unused", authToken: null, maxRetries: 0 });
const tools = [{ name: "weather", description: "The forecast.", input_schema: weatherParams }];

await turn("plain", async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 16, temperature: 0, messages: [{ role: "user", content: "Hello." }] });
  check(m.type === "message" && m.role === "assistant" && ["end_turn", "max_tokens"].includes(m.stop_reason) && m.usage.output_tokens > 0, json(m));
});
await turn("forced tool call", async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 300, messages: [{ role: "user", content: weatherPrompt }], tools, tool_choice: { type: "any" } });
  const uses = m.content.filter((b) => b.type === "tool_use");
  check(m.stop_reason === "tool_use" && uses.length > 0, json(m));
  for (const u of uses) valid(weatherParams, u.input, "input");
});
await turn("streamed", async () => {
  const s = anthropic.messages.stream({ model, max_tokens: 16, temperature: 0, messages: [{ role: "user", content: "Hello." }] });
  let text = "";
  s.on("text", (d) => { text += d; });
  const m = await s.finalMessage();
  const got = m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  check(got === text && m.usage.output_tokens > 0, `${json(m)}, deltas ${json(text)}`);
});
await turn("structured", async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 300, messages: [{ role: "user", content: personPrompt }],
    output_config: { format: { type: "json_schema", schema: personSchema } } });
  check(m.stop_reason === "end_turn", json(m));
  parsed(personSchema, m.content.filter((b) => b.type === "text").map((b) => b.text).join(""), "text");
});
console.log("ok");
