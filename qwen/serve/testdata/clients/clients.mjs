// The real OpenAI and Ollama JavaScript clients against a running
// qwenrun serve: node clients.mjs BASE_URL MODEL EAGER_BASE_URL [ARCH]
// (EAGER_BASE_URL a server whose model opens a tool call first, see
// serve's TestRealClients; ARCH the model's architecture, qwen3 unless
// given). Each check throws on a
// failure; the process exits non-zero with the reason. Run by serve's
// TestRealClients on a model with random weights, so every answer here is
// what the grammar forced.
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { Ollama } from "ollama";
import Ajv from "ajv";
import addFormats from "ajv-formats";

const [base, model, eagerBase, arch = "qwen3"] = process.argv.slice(2);
// The Ollama tools request, which serve's test also reads to make the
// eager server's model.
const ollamaTools = JSON.parse(readFileSync(new URL("./ollama-tools.json", import.meta.url), "utf8"));
const ajv = new Ajv({ strict: false });
addFormats(ajv);

function check(ok, what) {
  if (!ok) throw new Error(what);
}
function valid(schema, value, what) {
  const v = ajv.compile(schema);
  check(v(value), `${what}: ${JSON.stringify(value)} is invalid: ${ajv.errorsText(v.errors)}`);
}

const weatherParams = {
  type: "object",
  properties: { city: { enum: ["Paris", "Oslo"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city", "days"],
  additionalProperties: false,
};
const tools = [
  { type: "function", function: { name: "weather", description: "The forecast.", parameters: weatherParams } },
  { type: "function", function: { name: "now", description: "The time.", parameters: { type: "object", properties: {}, additionalProperties: false } } },
];
const person = {
  type: "object",
  properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer", minimum: 0, maximum: 120 }, born: { type: "string", format: "date" } },
  required: ["name", "age", "born"],
  additionalProperties: false,
};
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const extra = { chat_template_kwargs: { enable_thinking: false } };

const openai = new OpenAI({ baseURL: base + "/v1", apiKey: "unused" });

// Tools, streamed: the client's own stream helper accumulates the calls.
for (const seed of [1, 2]) {
  const req = { model, messages, tools, tool_choice: "required", max_tokens: 200, temperature: 1, seed, ...extra };
  const stream = openai.chat.completions.stream(req);
  const streamed = await stream.finalChatCompletion();
  const whole = await openai.chat.completions.create(req);
  for (const c of [streamed, whole]) {
    check(c.choices[0].finish_reason === "tool_calls", `finish_reason ${c.choices[0].finish_reason}`);
    // Calls alone: content null, as OpenAI's, not left out.
    check(c.choices[0].message.content === null, `content ${c.choices[0].message.content} beside calls alone`);
    const calls = c.choices[0].message.tool_calls;
    check(calls && calls.length > 0, "no tool_calls");
    for (const call of calls) {
      check(call.type === "function" && call.id.startsWith("call_"), `call ${JSON.stringify(call)}`);
      const args = JSON.parse(call.function.arguments);
      if (call.function.name === "weather") valid(weatherParams, args, "weather arguments");
      else check(call.function.name === "now", `called ${call.function.name}`);
    }
  }
  const names = (c) => c.choices[0].message.tool_calls.map((t) => t.function.name + t.function.arguments).join("|");
  check(names(streamed) === names(whole), `streamed ${names(streamed)}, whole ${names(whole)}`);

  // The results go back, as a tool message after the answer, with the
  // tools as clients send them every turn.
  const next = await openai.chat.completions.create({
    model, max_tokens: 4, tools, ...extra,
    messages: [...messages, streamed.choices[0].message, ...streamed.choices[0].message.tool_calls.map((t) => ({ role: "tool", tool_call_id: t.id, content: "18C" }))],
  });
  // Qwen3's template drops the empty think block of a no-think answer
  // once it is history, so the conversation before it is what is reused;
  // Qwen3.5's keeps it after the last user message, and its recurrent
  // layers go back to the end of the last prompt.
  check(next.usage.prompt_tokens_details.cached_tokens > 0, "the conversation given back did not reuse the cache");
}

// A named function, one call.
{
  const c = await openai.chat.completions.create({ model, messages, tools, tool_choice: { type: "function", function: { name: "now" } }, parallel_tool_calls: false, max_tokens: 200, seed: 3, ...extra });
  const calls = c.choices[0].message.tool_calls;
  check(calls.length === 1 && calls[0].function.name === "now", `calls ${JSON.stringify(calls)}`);
}

// Structured output, streamed and not.
for (const seed of [4, 5]) {
  const req = { model, messages: [{ role: "user", content: "Invent a person." }], max_tokens: 200, temperature: 1, seed, ...extra,
    response_format: { type: "json_schema", json_schema: { name: "person", schema: person, strict: true } } };
  const whole = await openai.chat.completions.create(req);
  check(whole.choices[0].finish_reason === "stop", `finish_reason ${whole.choices[0].finish_reason}`);
  valid(person, JSON.parse(whole.choices[0].message.content), "response_format");
  let text = "";
  for await (const chunk of await openai.chat.completions.create({ ...req, stream: true })) text += chunk.choices[0]?.delta?.content ?? "";
  check(text === whole.choices[0].message.content, `streamed ${text}, whole ${whole.choices[0].message.content}`);
}

// A schema that cannot be enforced is refused when strict; not strict,
// it is relaxed and the response's header says what was.
const regex = { type: "object", properties: { re: { type: "string", format: "regex" } }, required: ["re"], additionalProperties: false };
try {
  await openai.chat.completions.create({ model, messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: regex, strict: true } } });
  throw new Error("a regex format was not refused");
} catch (e) {
  check(e.status === 400 && /format/.test(e.message), `refusal: ${e.message}`);
}
{
  const { data, response } = await openai.chat.completions
    .create({ model, messages, max_tokens: 100, seed: 6, ...extra, response_format: { type: "json_schema", json_schema: { name: "x", schema: regex } } })
    .withResponse();
  check(response.headers.get("x-qwen-schema-relaxed") === "format@response_format.json_schema.schema#/properties/re", `relaxed: ${[...response.headers]}`);
  check(typeof JSON.parse(data.choices[0].message.content).re === "string", `relaxed: ${data.choices[0].message.content}`);
}

// Ollama: tools, and format.
const ollama = new Ollama({ host: base });
{
  // Ollama's API has no tool_choice: the model may answer in text, and
  // the random model all but never opens a call. So this request goes to
  // a second server (the third argument) whose model is tiny-a with the
  // head row of <tool_call> made to win at the answer's first token
  // (serve's eagerCaller): greedy, it opens a call, which the grammar then
  // holds to the tools. The ollama client's tool_calls are checked, whole
  // and streamed, and the call goes back with its result as a tool
  // message with tool_name and tool_call_id.
  const eager = new Ollama({ host: eagerBase });
  const req = { model, ...ollamaTools, options: { temperature: 0, num_predict: 128 } };
  const r = await eager.chat(req);
  const calls = r.message.tool_calls ?? [];
  check(r.done_reason === "stop" && calls.length > 0, `ollama: done_reason ${r.done_reason}, calls ${JSON.stringify(calls)}: want a call`);
  for (const call of calls) {
    const tool = tools.find((t) => t.function.name === call.function.name);
    check(tool !== undefined, `ollama called ${call.function.name}`);
    check(typeof call.function.arguments === "object", `ollama arguments ${JSON.stringify(call.function.arguments)}`);
    valid(tool.function.parameters, call.function.arguments, `ollama ${call.function.name} arguments`);
  }
  const streamed = [];
  for await (const part of await eager.chat({ ...req, stream: true })) streamed.push(...(part.message.tool_calls ?? []));
  // Each generation's calls have ids of their own, as Ollama's have.
  const noIDs = (cs) => JSON.stringify(cs.map(({ id, ...c }) => c));
  check(calls.every((c) => /^call_/.test(c.id)) && streamed.every((c) => /^call_/.test(c.id)), `ollama call ids: ${JSON.stringify(calls)}, streamed ${JSON.stringify(streamed)}`);
  check(noIDs(streamed) === noIDs(calls), `ollama streamed calls ${JSON.stringify(streamed)}, whole ${JSON.stringify(calls)}`);
  const next = await eager.chat({ ...req, options: { num_predict: 1 },
    messages: [...req.messages, r.message, ...calls.map((c) => ({ role: "tool", tool_name: c.function.name, tool_call_id: c.id, content: "12:00" }))] });
  // prompt_eval_count counts the tokens computed: the call given back and
  // its results, after the cached conversation.
  check(next.prompt_eval_count > 2 * calls.length, `ollama: the call given back made ${next.prompt_eval_count} tokens to compute`);

  const f = await ollama.chat({ model, messages: [{ role: "user", content: "Invent a person." }], format: person, think: false, options: { seed: 7, num_predict: 200 } });
  check(f.done_reason === "stop", `ollama done_reason ${f.done_reason}`);
  valid(person, JSON.parse(f.message.content), "ollama format");
  let text = "";
  for await (const part of await ollama.chat({ model, messages: [{ role: "user", content: "Invent a person." }], format: person, think: false, stream: true, options: { seed: 7, num_predict: 200 } })) text += part.message.content;
  check(text === f.message.content, `ollama streamed ${text}, whole ${f.message.content}`);
}

// The Responses API, as the openai package's responses.create and its
// stream helper use it.
{
  const fn = weatherParams;
  const rtools = [{ type: "function", name: "weather", description: "The forecast.", parameters: fn, strict: true }];
  const req = { model, input: "What is the weather in Paris?", tools: rtools, tool_choice: "required", reasoning: { effort: "none" },
    max_output_tokens: 200, temperature: 1, seed: 3 };
  const whole = await openai.responses.create(req);
  check(whole.status === "completed" && whole.output.length > 0, `responses: ${JSON.stringify(whole)}`);
  for (const item of whole.output) {
    check(item.type === "function_call" && item.name === "weather" && item.call_id.startsWith("call_"), `responses item ${JSON.stringify(item)}`);
    valid(fn, JSON.parse(item.arguments), "responses weather arguments");
  }
  // The stream helper accumulates the same response from the events.
  const stream = openai.responses.stream(req);
  const types = [];
  stream.on("event", (ev) => types.push(ev.type));
  const streamed = await stream.finalResponse();
  const calls = (r) => r.output.map((i) => i.name + i.arguments).join("|");
  check(calls(streamed) === calls(whole), `responses streamed ${calls(streamed)}, whole ${calls(whole)}`);
  check(types[0] === "response.created" && types.at(-1) === "response.completed" && types.includes("response.function_call_arguments.done"),
    `responses events ${types}`);

  // The results go back with previous_response_id, and the tools again
  // (they are not the previous response's to keep).
  const next = await openai.responses.create({ model, previous_response_id: whole.id, max_output_tokens: 4, reasoning: { effort: "none" }, tools: rtools,
    input: whole.output.map((c) => ({ type: "function_call_output", call_id: c.call_id, output: "18C" })) });
  check(next.previous_response_id === whole.id && next.usage.input_tokens_details.cached_tokens > 0,
    `responses next: ${JSON.stringify(next.usage)}`);
  // Each response's own input, as inputItems.list pages it (one item a
  // page here): the results, with their ids; the string, a user message.
  const listed = [];
  for await (const item of openai.responses.inputItems.list(next.id, { limit: 1, order: "asc" })) listed.push(item);
  check(listed.length === whole.output.length &&
    listed.every((i, k) => i.type === "function_call_output" && i.id.startsWith("fco_") && i.call_id === whole.output[k].call_id),
    `responses input items ${JSON.stringify(listed)}`);
  const asked = await openai.responses.inputItems.list(whole.id);
  check(asked.data.length === 1 && !asked.has_more && asked.data[0].role === "user" && asked.data[0].content[0].text === req.input,
    `responses input items ${JSON.stringify(asked.data)}`);
  // Text, streamed as the helper gives it.
  const text = openai.responses.stream({ model, input: "Hi", max_output_tokens: 8, temperature: 0, reasoning: { effort: "none" } });
  let deltas = "";
  text.on("response.output_text.delta", (ev) => { deltas += ev.delta; });
  const final = await text.finalResponse();
  check(final.output_text === deltas && final.status === "incomplete", `responses text ${JSON.stringify(final)}, deltas ${deltas}`);

  // Structured output.
  for (const seed of [4, 5]) {
    const r = await openai.responses.create({ model, input: "Invent a person.", reasoning: { effort: "none" }, max_output_tokens: 200, temperature: 1, seed,
      text: { format: { type: "json_schema", name: "person", schema: person, strict: true } } });
    check(r.status === "completed", `responses structured ${r.status}`);
    valid(person, JSON.parse(r.output_text), "responses text.format");
  }
  // A built-in tool is refused; so is what OpenAI refuses, each naming
  // its path as OpenAI's errors do.
  const refused = [
    [{ tools: [{ type: "web_search" }] }, "tools[0].type"],
    [{ text: { format: { type: "json_schema", schema: person } } }, "text.format.name"],
    [{ reasoning: { summary: "verbose" } }, "reasoning.summary"],
    [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
    [{ metadata: { note: "v".repeat(513) } }, "metadata.note"],
  ];
  for (const [extra, param] of refused) {
    try {
      await openai.responses.create({ model, input: "Hi", max_output_tokens: 1, ...extra });
      throw new Error(`${JSON.stringify(extra).slice(0, 80)} was not refused`);
    } catch (e) {
      check(e.status === 400 && e.param === param, `${param} refusal: ${e.status} ${e.param} ${e.message}`);
    }
  }
}

// Ollama's version, show and ps, as the ollama package reads them.
{
  const v = await ollama.version();
  const [major, minor, patch] = v.version.split(".").map(Number);
  check(major > 0 || minor > 13 || (minor === 13 && patch >= 4), `ollama version ${v.version}: want 0.13.4 or later`);
  const show = await ollama.show({ model });
  check(show.capabilities.includes("tools") && show.details.family === arch && show.model_info[arch + ".context_length"] > 0 &&
    show.template.includes(".Tools") && show.parameters.includes("temperature"), `ollama show ${JSON.stringify(show)}`);
  check(Number.isInteger(show.model_info["general.file_type"]), `ollama show: general.file_type ${JSON.stringify(show.model_info["general.file_type"])}, want ggml's number`);
  const ps = await ollama.ps();
  check(ps.models.length === 1 && ps.models[0].name === model + ":latest" && ps.models[0].size_vram === 0 && !Number.isNaN(Date.parse(ps.models[0].expires_at)),
    `ollama ps ${JSON.stringify(ps)}`);

  // keep_alive 0 without a prompt is Ollama's unload, as the package
  // sends it; the answer is Ollama's.
  const unloaded = await ollama.generate({ model, prompt: "", keep_alive: 0 });
  check(unloaded.done && unloaded.done_reason === "unload" && unloaded.response === "", `generate unload ${JSON.stringify(unloaded)}`);
  const chatUnloaded = await ollama.chat({ model, messages: [], keep_alive: "0s" });
  check(chatUnloaded.done && chatUnloaded.done_reason === "unload" && chatUnloaded.message.content === "", `chat unload ${JSON.stringify(chatUnloaded)}`);
  // An option the server cannot honour is refused, naming it.
  try {
    await ollama.generate({ model, prompt: "Hi", options: { typical_p: 0.5, num_predict: 1 } });
    throw new Error("typical_p 0.5 was answered");
  } catch (e) {
    check(e.status_code === 400 && /options\.typical_p/.test(e.error), `typical_p refusal: ${e.status_code} ${e.error}`);
  }
  // The probe clients make before they talk to Ollama.
  for (const method of ["GET", "HEAD"]) {
    const r = await fetch(base + "/", { method });
    const body = await r.text();
    check(r.status === 200 && body === (method === "GET" ? "Ollama is running" : ""), `${method} /: ${r.status} ${JSON.stringify(body)}`);
  }
}
console.log("ok");
