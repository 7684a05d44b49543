// `pagellm serve --ssl-certfile/--ssl-keyfile` with the official `openai` npm client over
// HTTPS. The test's self-signed certificate is trusted through NODE_EXTRA_CA_CERTS.
// Usage: node openai_tls.test.mjs <https base url> <model> <api key>
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });

const models = await client.models.list();
assert.equal(models.data[0].id, model);
const c = await client.completions.create({
  model, prompt: 'Once upon a time', max_tokens: 5, temperature: 0,
});
assert.equal(c.usage.completion_tokens, 5);
assert.ok(c.choices[0].text.length > 0);
const stream = await client.completions.create({
  model, prompt: 'Once upon a time', max_tokens: 5, temperature: 0, stream: true,
});
let text = '';
for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
assert.equal(text, c.choices[0].text);
const bad = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
await assert.rejects(bad.models.list(), (e) => e.status === 401);
console.log('ok - https');
