// The ollama package: chat, generate, and what a client asks of the
// server (version, show, ps). Ollama's API has no tool_choice, so the
// tools turn checks the answer's shape, not that a call was made.
import { Ollama } from "ollama";
import { base, model, check, json, valid, parsed, turn, weatherParams, weatherPrompt, personSchema, personPrompt } from "./lib.mjs";

const ollama = new Ollama({ host: base });
const tools = [{ type: "function", function: { name: "weather", description: "The forecast.", parameters: weatherParams } }];

await turn("plain", async () => {
  const r = await ollama.chat({ model, messages: [{ role: "user", content: "Hello." }], options: { num_predict: 16, temperature: 0 } });
  check(r.done && r.message.role === "assistant" && typeof r.message.content === "string" && r.eval_count > 0, json(r));
});
await turn("tools (no tool_choice in Ollama's API)", async () => {
  const r = await ollama.chat({ model, messages: [{ role: "user", content: weatherPrompt }], tools, think: false, options: { num_predict: 64 } });
  check(r.done && ["stop", "length"].includes(r.done_reason), json(r));
  for (const c of r.message.tool_calls ?? []) valid(weatherParams, c.function.arguments, "arguments");
});
await turn("streamed", async () => {
  let text = "", last;
  for await (const part of await ollama.generate({ model, prompt: "Hello.", stream: true, options: { num_predict: 16, temperature: 0 } })) {
    text += part.response;
    last = part;
  }
  check(last.done && last.eval_count > 0 && typeof text === "string", json(last));
});
await turn("structured", async () => {
  const r = await ollama.chat({ model, messages: [{ role: "user", content: personPrompt }], format: personSchema, think: false, options: { num_predict: 300 } });
  check(r.done_reason === "stop", json(r));
  parsed(personSchema, r.message.content, "content");
});
await turn("version, show, ps", async () => {
  const v = await ollama.version();
  const show = await ollama.show({ model });
  const ps = await ollama.ps();
  check(/^\d+\.\d+\.\d+$/.test(v.version) && show.capabilities.includes("tools") && ps.models.length === 1, `${json(v)} ${json(show.capabilities)} ${json(ps)}`);
});
console.log("ok");
