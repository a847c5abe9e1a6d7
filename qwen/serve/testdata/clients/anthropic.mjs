// The real Anthropic JavaScript client against running qwenrun servers:
// node anthropic.mjs BASE_URL MODEL DEMO_URL DEMO_MODEL [opened]. MODEL
// has random weights (what it answers under tool_choice any is what the
// grammar forced); DEMO_MODEL is a bundled demo model, a trained Qwen3 or
// Qwen3.5, for thinking ("opened": its prompt opens the thinking, as
// Qwen3.5's does, where Qwen3 writes <think> itself). Each check throws on a failure; the process exits non-zero
// with the reason. Run by serve's TestRealClients.
import Anthropic from "@anthropic-ai/sdk";
import Ajv from "ajv";

const [base, model, demoBase, demoModel, opened] = process.argv.slice(2);
const ajv = new Ajv({ strict: false });

function check(ok, what) {
  if (!ok) throw new Error(what);
}
function valid(schema, value, what) {
  const v = ajv.compile(schema);
  check(v(value), `${what}: ${JSON.stringify(value)} is invalid: ${ajv.errorsText(v.errors)}`);
}
const json = (v) => JSON.stringify(v);
// The prompt in all: the tokens evaluated and those from the cache.
const promptTokens = (m) => m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0);

// A client as Claude Code's is: the key as x-api-key, no retries here.
const client = (baseURL) => new Anthropic({ baseURL, apiKey: "unused", authToken: null, maxRetries: 0 });
const anthropic = client(base);

// The message streamed, accumulated by the SDK's own stream helper, is
// the message not streamed; ids aside, and the cache's share of the
// prompt (the second of two same prompts reads it from the cache).
async function same(c, req, what) {
  const whole = await c.messages.create(req);
  const streamed = await c.messages.stream(req).finalMessage();
  const strip = (m) => ({ content: m.content.map((b) => ({ ...b, id: undefined })), stop_reason: m.stop_reason, stop_sequence: m.stop_sequence, output: m.usage.output_tokens, prompt: promptTokens(m) });
  check(json(strip(streamed)) === json(strip(whole)), `${what}: streamed ${json(streamed)}, not streamed ${json(whole)}`);
  check(whole.id.startsWith("msg_") && whole.type === "message" && whole.role === "assistant" && whole.model === req.model, `${what}: ${json(whole)}`);
  return whole;
}

// The models, as the SDK lists them a page of one at a time (its
// iterator follows has_more and last_id) and retrieves one.
{
  const ids = [];
  for await (const m of anthropic.models.list({ limit: 1 })) {
    check(m.type === "model" && m.display_name === m.id && !Number.isNaN(Date.parse(m.created_at)), `models.list: ${json(m)}`);
    ids.push(m.id);
  }
  check(ids.includes(model) && new Set(ids).size === ids.length, `models.list: ${json(ids)}`);
  const one = await anthropic.models.retrieve(model);
  check(one.id === model && one.type === "model", `models.retrieve: ${json(one)}`);
}

// A plain message, and count_tokens of the same request. Thinking is
// off: a Qwen3.5 prompt opens the thinking unless told not to.
{
  const req = { model, max_tokens: 16, temperature: 0, system: "Be brief.", thinking: { type: "disabled" }, messages: [{ role: "user", content: "What is 2+2?" }] };
  const m = await same(anthropic, req, "plain");
  check(m.content.length === 1 && m.content[0].type === "text" && m.content[0].text.length > 0, `plain: ${json(m.content)}`);
  check(m.stop_reason === "max_tokens" && m.stop_sequence === null && m.usage.output_tokens === 16, `plain: ${json(m)}`);
  const { input_tokens } = await anthropic.messages.countTokens({ model, system: req.system, thinking: req.thinking, messages: req.messages });
  check(input_tokens === promptTokens(m), `count_tokens ${input_tokens}, usage ${json(m.usage)}`);
}

// top_k 1 and top_p 0 keep the most likely token alone: at temperature
// 1 they answer as greedy decoding does.
{
  const req = { model, max_tokens: 16, system: "Be brief.", thinking: { type: "disabled" }, messages: [{ role: "user", content: "What is 2+2?" }] };
  const text = (extra) => anthropic.messages.create({ ...req, ...extra }).then((m) => m.content[0].text);
  const greedy = await text({ temperature: 0 });
  for (const extra of [{ temperature: 1, top_k: 1 }, { temperature: 1, top_p: 0 }]) {
    const got = await text(extra);
    check(got === greedy, `${json(extra)}: ${json(got)}, greedy ${json(greedy)}`);
  }
}

// Tools: tool_choice any on the random model still gives valid calls,
// streamed as not; their results go back for a second turn.
{
  const weather = {
    type: "object",
    properties: { city: { enum: ["Paris", "Oslo"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
    required: ["city", "days"],
    additionalProperties: false,
  };
  const tools = [
    { name: "weather", description: "The forecast.", input_schema: weather },
    { name: "now", description: "The time.", input_schema: { type: "object", properties: {}, additionalProperties: false } },
  ];
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  const req = { model, max_tokens: 200, temperature: 0, tools, tool_choice: { type: "any" }, thinking: { type: "disabled" }, messages };
  const m = await same(anthropic, req, "tools");
  check(m.stop_reason === "tool_use" && m.content.length > 0, `tools: ${json(m)}`);
  for (const b of m.content) {
    check(b.type === "tool_use" && /^toolu_[A-Za-z0-9]{24}$/.test(b.id), `block ${json(b)}`);
    if (b.name === "weather") valid(weather, b.input, "weather input");
    else check(b.name === "now" && json(b.input) === "{}", `called ${json(b)}`);
  }
  const { input_tokens } = await anthropic.messages.countTokens({ model, tools, tool_choice: req.tool_choice, thinking: req.thinking, messages });
  check(input_tokens === promptTokens(m), `count_tokens with tools ${input_tokens}, usage ${json(m.usage)}`);
  // tool_choice none: the tools stay in the prompt (count_tokens counts
  // them as with auto), and no call comes back.
  const none = await same(anthropic, { ...req, tool_choice: { type: "none" } }, "tool_choice none");
  check(none.stop_reason !== "tool_use" && none.content.every((b) => b.type === "text"), `tool_choice none: ${json(none)}`);
  const counted = (extra) => anthropic.messages.countTokens({ model, thinking: req.thinking, messages, ...extra }).then((c) => c.input_tokens);
  const [withNone, withAuto, without] = await Promise.all([counted({ tools, tool_choice: { type: "none" } }), counted({ tools }), counted({})]);
  check(withNone === withAuto && withNone > without && withNone === promptTokens(none), `count_tokens: tools with none ${withNone}, with auto ${withAuto}, no tools ${without}`);
  const next = await anthropic.messages.create({
    model, max_tokens: 4, tools, thinking: { type: "disabled" },
    messages: [...messages, { role: "assistant", content: m.content },
      { role: "user", content: m.content.map((b) => ({ type: "tool_result", tool_use_id: b.id, content: "18C" })) }],
  });
  check(next.usage.cache_read_input_tokens > 0, `the second turn did not reuse the first's cache: ${json(next.usage)}`);
}

// Errors, as the SDK reads them.
try {
  await anthropic.messages.create({ model: "another-model", max_tokens: 4, messages: [{ role: "user", content: "Hi" }] });
  throw new Error("another model's name was answered");
} catch (e) {
  check(e instanceof Anthropic.NotFoundError && e.error?.error?.type === "not_found_error", `another model: ${e}`);
}
try {
  await anthropic.messages.create({ model, max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }] }] });
  throw new Error("an image was answered");
} catch (e) {
  check(e instanceof Anthropic.BadRequestError && /text only/.test(e.message), `an image: ${e}`);
}

// Thinking on the demo model, a Qwen3 trained on Go source that does not
// think by itself: with tools its grammar opens the thinking, and the
// budget closes it (a smaller budget, a shorter start of the same
// thinking), then the calls; disabled, the calls alone. The budgets are
// adaptive's (this server's, of any size): enabled's are Anthropic's, at
// least 1024, more than a small model's test should generate.
//
// A budget_tokens that Anthropic refuses is refused, naming it.
try {
  await anthropic.messages.create({ model, max_tokens: 2000, thinking: { type: "enabled", budget_tokens: 100 }, messages: [{ role: "user", content: "Hi" }] });
  throw new Error("budget_tokens 100 was answered");
} catch (e) {
  check(e instanceof Anthropic.BadRequestError && /thinking\.budget_tokens/.test(e.message), `budget_tokens 100: ${e}`);
}
{
  const demo = client(demoBase);
  const tools = [{ name: "lines", description: "Counts lines.", input_schema: { type: "object", properties: { n: { type: "integer", minimum: 1, maximum: 9 } }, required: ["n"] } }];
  const req = { model: demoModel, max_tokens: 100, temperature: 0, tools, tool_choice: { type: "any", disable_parallel_tool_use: true }, messages: [{ role: "user", content: "Write a Go function that reverses a string." }] };
  const thinking = [];
  for (const budget_tokens of [4, 12]) {
    const m = await same(demo, { ...req, thinking: { type: "adaptive", budget_tokens } }, `thinking, budget ${budget_tokens}`);
    check(m.content[0]?.type === "thinking" && m.content[0].thinking.length > 0 && m.content.slice(1).length > 0 &&
      m.content.slice(1).every((b) => b.type === "tool_use") && m.stop_reason === "tool_use", `thinking on: ${json(m)}`);
    // Signed as Anthropic signs: the SDK's stream helper gathers the
    // signature_delta into the block, the same as the one not streamed.
    check(typeof m.content[0].signature === "string" && m.content[0].signature.length > 0, `thinking unsigned: ${json(m.content[0])}`);
    thinking.push(m.content[0].thinking);
  }
  check(thinking[0].length < thinking[1].length && thinking[1].startsWith(thinking[0].trimEnd()), `budgets 4 and 12: ${json(thinking)}`);
  const off = await same(demo, { ...req, thinking: { type: "disabled" } }, "no thinking");
  check(off.content.length > 0 && off.content.every((b) => b.type === "tool_use"), `thinking off: ${json(off.content)}`);

  // Without tools the budget opens the thinking (the Qwen3 demo model
  // would not; Qwen3.5's prompt does) and closes it after budget_tokens:
  // a thinking block, then text. The same request with a larger budget,
  // cut after <think> (if the answer writes it) and as many tokens,
  // thinks the same: the budget ended the thinking there.
  const plain = { model: demoModel, temperature: 0, messages: req.messages };
  const budget_tokens = 6;
  const m = await same(demo, { ...plain, max_tokens: 40, thinking: { type: "adaptive", budget_tokens } }, "thinking without tools");
  check(m.content.length === 2 && m.content[0].type === "thinking" && m.content[0].thinking.length > 0 &&
    m.content[1].type === "text" && m.content[1].text.trim().length > 0 && m.usage.output_tokens > budget_tokens + 2, `thinking without tools: ${json(m)}`);
  // The thinking block goes back as it came, signature and all, as
  // clients send a conversation on.
  check(m.content[0].signature.length > 0, `thinking without tools, unsigned: ${json(m.content[0])}`);
  const on = await demo.messages.create({ ...plain, max_tokens: 4, thinking: { type: "disabled" },
    messages: [...plain.messages, { role: "assistant", content: m.content }, { role: "user", content: "Shorter." }] });
  check(on.content.length > 0 && on.usage.output_tokens > 0, `the signed thinking sent back: ${json(on)}`);
  const cutAt = budget_tokens + (opened === "opened" ? 0 : 1);
  const cut = await demo.messages.create({ ...plain, max_tokens: cutAt, thinking: { type: "adaptive", budget_tokens: 1000 } });
  check(cut.stop_reason === "max_tokens" && cut.content.length === 1 && cut.content[0].type === "thinking" &&
    cut.content[0].thinking === m.content[0].thinking, `budget 1000 cut after ${cutAt} tokens: ${json(cut.content)}; budget ${budget_tokens}: ${json(m.content)}`);
}
console.log("ok");
