// The real OpenAI and Ollama JavaScript clients' embedding calls against
// a running qwenrun serve of an embedding model: node embed.mjs BASE_URL
// MODEL. Run by serve's TestRealEmbeddingClients.
import OpenAI from "openai";
import { Ollama } from "ollama";

const [base, model] = process.argv.slice(2);

function check(ok, what) {
  if (!ok) throw new Error(what);
}
function norm(v) {
  return Math.sqrt(v.reduce((s, x) => s + x * x, 0));
}
function close(a, b, what) {
  check(a.length === b.length, `${what}: ${a.length} values against ${b.length}`);
  a.forEach((x, i) => check(Math.abs(x - b[i]) < 1e-6, `${what}: value ${i} is ${x} against ${b[i]}`));
}

const texts = ["The capital of China is Beijing.", "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:What is the capital of China?"];
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none" });

// The client asks for base64 and decodes it itself unless told float.
const b64 = await openai.embeddings.create({ model, input: texts });
check(b64.data.length === 2 && b64.data[1].index === 1, `data: ${JSON.stringify(b64.data.map((d) => d.index))}`);
check(b64.usage.prompt_tokens > 0 && b64.model === model, `usage ${JSON.stringify(b64.usage)}, model ${b64.model}`);
const float = await openai.embeddings.create({ model, input: texts, encoding_format: "float" });
for (let i = 0; i < 2; i++) {
  check(Math.abs(norm(float.data[i].embedding) - 1) < 1e-5, `vector ${i} has length ${norm(float.data[i].embedding)}`);
  close(Array.from(b64.data[i].embedding), float.data[i].embedding, `base64 against float, input ${i}`);
}
const short = await openai.embeddings.create({ model, input: texts[0], dimensions: 16, encoding_format: "float" });
check(short.data[0].embedding.length === 16 && Math.abs(norm(short.data[0].embedding) - 1) < 1e-5, "16 dimensions");

const ollama = new Ollama({ host: base });
const ol = await ollama.embed({ model, input: texts });
check(ol.embeddings.length === 2, `ollama: ${ol.embeddings.length} vectors`);
for (let i = 0; i < 2; i++) close(ol.embeddings[i], float.data[i].embedding, `ollama against openai, input ${i}`);
const one = await ollama.embed({ model, input: texts[0], dimensions: 16 });
close(one.embeddings[0], short.data[0].embedding, "ollama's 16 dimensions");
console.log("ok");
