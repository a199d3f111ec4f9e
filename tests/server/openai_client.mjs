// Drives kiln-server with the official `openai` npm package: chat, streaming,
// completions, stop sequences and errors. Run by test_openai_client.py, which
// installs the package and starts the server.
//   node openai_client.mjs BASE_URL API_KEY
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
let failures = 0;
function check(ok, what) {
  if (!ok) {
    failures++;
    console.log("FAIL:", what);
  }
}

const messages = [{ role: "user", content: "Tell me a story about a cat" }];
const whole = await client.chat.completions.create({ model: "any", messages, max_tokens: 24, temperature: 0 });
const text = whole.choices[0].message.content;
check(typeof text === "string" && text.length > 0, "chat reply text: " + JSON.stringify(whole));
check(whole.choices[0].message.role === "assistant", "assistant role");
check(["stop", "length"].includes(whole.choices[0].finish_reason), "finish_reason");
check(whole.usage.completion_tokens > 0 && whole.usage.total_tokens === whole.usage.prompt_tokens + whole.usage.completion_tokens, "usage");

const stream = await client.chat.completions.create({ model: "any", messages, max_tokens: 24, temperature: 0, stream: true });
let streamed = "", finish = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  streamed += chunk.choices[0]?.delta?.content ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
check(streamed === text, `streamed text equals the whole reply: ${JSON.stringify(streamed)} vs ${JSON.stringify(text)}`);
check(finish === whole.choices[0].finish_reason && chunks > 2, "stream finish_reason and chunks");

// A stop sequence taken from the middle of the greedy reply.
const cut = text.indexOf(" ", Math.floor(text.length / 2));
check(cut > 0, "a space in the second half of the reply: " + JSON.stringify(text));
const stop = text.slice(cut, cut + 3);
const stopped = await client.chat.completions.create({ model: "any", messages, max_tokens: 24, temperature: 0, stop: [stop] });
check(stopped.choices[0].message.content === text.slice(0, text.indexOf(stop)), "text before the stop sequence");
check(stopped.choices[0].finish_reason === "stop", "finish_reason stop at a stop sequence");
const stoppedStream = await client.chat.completions.create({ model: "any", messages, max_tokens: 24, temperature: 0, stop, stream: true });
let stoppedText = "";
for await (const chunk of stoppedStream) stoppedText += chunk.choices[0]?.delta?.content ?? "";
check(stoppedText === text.slice(0, text.indexOf(stop)), "streamed text never shows the stop sequence");

const completion = await client.completions.create({ model: "any", prompt: "Once upon a time", max_tokens: 8, temperature: 0, logprobs: 1 });
check(typeof completion.choices[0].text === "string" && completion.choices[0].logprobs.tokens.length === 8, "completions with logprobs");

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].object === "model", "models list");

try {
  await client.chat.completions.create({ model: "any", messages, temperature: -1 });
  check(false, "a negative temperature is refused");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400, "BadRequestError 400: " + e);
  check(/temperature/.test(e.message), "the error names the field: " + e.message);
}
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  check(false, "a wrong key is refused");
} catch (e) {
  check(e instanceof OpenAI.AuthenticationError && e.status === 401, "AuthenticationError 401: " + e);
}

console.log(failures ? `${failures} check(s) failed` : "all openai client checks passed");
process.exit(failures ? 1 : 0);
