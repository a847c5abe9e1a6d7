// The @langchain/openai package: ChatOpenAI.
import { ChatOpenAI } from "@langchain/openai";
import { base, model, check, json, valid, turn, weatherParams, weatherZod, weatherPrompt, personSchema, personZod, personPrompt } from "./lib.mjs";

const llm = (maxTokens, temperature) => new ChatOpenAI({ model, apiKey: "unused", configuration: { baseURL: base + "/v1" }, maxTokens, temperature, maxRetries: 0 });
const weather = { type: "function", function: { name: "weather", description: "The forecast.", parameters: weatherParams } };

await turn("plain", async () => {
  const m = await llm(16, 0).invoke("Hello.");
  check(typeof m.content === "string" && m.usage_metadata.output_tokens > 0, json(m));
});
await turn("forced tool call", async () => {
  const m = await llm(300).bindTools([weather], { tool_choice: "required" }).invoke(weatherPrompt);
  check(m.tool_calls.length > 0, json(m));
  for (const c of m.tool_calls) {
    check(c.name === "weather", json(c));
    valid(weatherParams, c.args, "args");
  }
});
await turn("streamed", async () => {
  let text = "", chunks = 0;
  for await (const c of await llm(16).stream("Hello.")) {
    text += c.content;
    chunks++;
  }
  check(chunks > 1 && typeof text === "string", `${chunks} chunks`);
});
await turn("structured", async () => {
  const v = await llm(300).withStructuredOutput(personZod, { name: "person", method: "jsonSchema", strict: true }).invoke(personPrompt);
  valid(personSchema, v, "output");
});
console.log("ok");
