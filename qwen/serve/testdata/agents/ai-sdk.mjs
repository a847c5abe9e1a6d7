// The Vercel AI SDK (ai with @ai-sdk/openai), on its default OpenAI
// model (the Responses API) and on chat completions.
import { generateText, streamText, tool, Output } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { base, model, check, json, valid, turn, weatherParams, weatherZod, weatherPrompt, personSchema, personZod, personPrompt } from "./lib.mjs";

const provider = createOpenAI({ baseURL: base + "/v1", apiKey: "unused" });
const tools = { weather: tool({ description: "The forecast.", inputSchema: weatherZod }) };

for (const [api, m] of [["responses", provider(model)], ["chat", provider.chat(model)]]) {
  await turn(`${api} plain`, async () => {
    const r = await generateText({ model: m, prompt: "Hello.", maxOutputTokens: 16, maxRetries: 0 });
    check(typeof r.text === "string" && ["stop", "length"].includes(r.finishReason), `${r.finishReason} ${json(r.text)}`);
  });
  await turn(`${api} forced tool call`, async () => {
    const r = await generateText({ model: m, prompt: weatherPrompt, tools, toolChoice: "required", maxOutputTokens: 300, maxRetries: 0 });
    check(r.finishReason === "tool-calls" && r.toolCalls.length > 0, `${r.finishReason} ${json(r.toolCalls)}`);
    for (const c of r.toolCalls) valid(weatherParams, c.input, "input");
  });
  await turn(`${api} streamed`, async () => {
    const r = streamText({ model: m, prompt: "Hello.", maxOutputTokens: 16, maxRetries: 0 });
    let text = "";
    for await (const d of r.textStream) text += d;
    check(text === (await r.text) && ["stop", "length"].includes(await r.finishReason), `${await r.finishReason} ${json(text)}`);
  });
  await turn(`${api} second turn`, async () => {
    // The first answer's messages given back: on the Responses API, while
    // it stores its responses (its default), the SDK sends their items as
    // item_reference.
    const first = await generateText({ model: m, prompt: "Hello.", maxOutputTokens: 16, maxRetries: 0 });
    const r = await generateText({ model: m, messages: [{ role: "user", content: "Hello." }, ...first.response.messages, { role: "user", content: "And then?" }], maxOutputTokens: 16, maxRetries: 0 });
    check(typeof r.text === "string" && ["stop", "length"].includes(r.finishReason), `${r.finishReason} ${json(r.text)}`);
  });
  await turn(`${api} structured`, async () => {
    const r = await generateText({ model: m, prompt: personPrompt, output: Output.object({ schema: personZod }), maxOutputTokens: 300, maxRetries: 0 });
    valid(personSchema, r.output, "output");
  });
}
console.log("ok");
