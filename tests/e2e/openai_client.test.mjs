// End-to-end checks of `pagellm serve` with the official `openai` npm client.
// Usage: node openai_client.test.mjs <base url, e.g. http://127.0.0.1:8000> <model name>
// Exits non-zero on the first failed check. Run by tests/test_server_openai_e2e.py.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, model, overLimitArg] = process.argv.slice(2);
// Prompt tokens that exceed the server's context (--max-model-len); the default server has 512.
const overLimit = Number(overLimitArg ?? 600);
if (!baseURL || !model) {
  console.error('usage: node openai_client.test.mjs <base url> <model>');
  process.exit(2);
}
// No retries: a failure must show, not be papered over by a second attempt.
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'unused', maxRetries: 0 });

const PROMPTS = [
  'Once upon a time', 'The little dog', 'Lily and Ben went to the park.',
  'One day, a big red ball', 'Tom was sad because', 'The sun was shining and',
  'Sara had a new toy.', 'In the forest there lived', 'The cat sat on', 'Mom said',
  'It was a rainy day', 'The boy and his dad', 'A bird flew', 'Once there was a fish',
  'The girl found a box', 'At night, the moon',
];
const messagesFor = (p) => [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: p },
];

let checks = 0;
async function check(name, fn) {
  try {
    await fn();
    checks++;
    console.log(`ok - ${name}`);
  } catch (e) {
    console.error(`FAILED - ${name}\n${e.stack || e}`);
    process.exit(1);
  }
}

// Streams a request; returns {texts: per-index strings, reasons, usage, chunks}.
async function collect(stream, pick) {
  const texts = {};
  const reasons = {};
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      texts[c.index] = (texts[c.index] ?? '') + (pick(c) ?? '');
      if (c.finish_reason) reasons[c.index] = c.finish_reason;
    }
  }
  return { texts, reasons, usage, chunks };
}
const completionText = (c) => c.text;
const chatText = (c) => c.delta?.content;

const completion = (params) => client.completions.create({ model, ...params });
const chat = (params) => client.chat.completions.create({ model, ...params });

await check('models.list names the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);
});

for (const [label, params] of [
  ['greedy', { temperature: 0, max_tokens: 24 }],
  ['n=3 seeded sampling', { temperature: 0.9, max_tokens: 24, n: 3, seed: 7 }],
  ['stop strings', { temperature: 0, max_tokens: 40, stop: [' girl', '.'] }],
]) {
  await check(`completions: streamed == non-streamed (${label})`, async () => {
    const full = await completion({ prompt: PROMPTS[0], ...params });
    const s = await collect(
      await completion({
        prompt: PROMPTS[0], ...params, stream: true, stream_options: { include_usage: true },
      }),
      completionText);
    assert.equal(full.choices.length, params.n ?? 1);
    for (const c of full.choices) {
      assert.equal(s.texts[c.index], c.text);
      assert.equal(s.reasons[c.index], c.finish_reason);
    }
    assert.equal(s.usage.completion_tokens, full.usage.completion_tokens);
    assert.equal(s.usage.prompt_tokens, full.usage.prompt_tokens);
  });
  await check(`chat: streamed == non-streamed (${label})`, async () => {
    const full = await chat({ messages: messagesFor(PROMPTS[1]), ...params });
    const s = await collect(
      await chat({
        messages: messagesFor(PROMPTS[1]), ...params, stream: true,
        stream_options: { include_usage: true },
      }),
      chatText);
    for (const c of full.choices) {
      assert.equal(c.message.role, 'assistant');
      assert.equal(s.texts[c.index], c.message.content);
      assert.equal(s.reasons[c.index], c.finish_reason);
    }
    assert.equal(s.usage.completion_tokens, full.usage.completion_tokens);
  });
}

await check('stop: text ends before the stop string, finish_reason stop', async () => {
  const r = await completion({ prompt: PROMPTS[0], temperature: 0, max_tokens: 40, stop: [' girl'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(!r.choices[0].text.includes(' girl'));
});

await check('same seed, same output (completions and chat)', async () => {
  const p = { prompt: PROMPTS[2], temperature: 1.0, max_tokens: 32, seed: 1234 };
  const a = await completion(p);
  const b = await completion(p);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const q = { messages: messagesFor(PROMPTS[3]), temperature: 1.0, max_tokens: 32, seed: 99 };
  const c = await chat(q);
  const d = await chat({ ...q, stream: true });
  assert.equal((await collect(d, chatText)).texts[0], c.choices[0].message.content);
  assert.equal((await chat(q)).choices[0].message.content, c.choices[0].message.content);
});

await check('completions logprobs', async () => {
  const r = await completion({ prompt: PROMPTS[0], temperature: 0, max_tokens: 8, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 8);
  assert.equal(lp.token_logprobs.length, 8);
  assert.equal(lp.text_offset.length, 8);
  assert.equal(lp.tokens.join(''), r.choices[0].text);
  for (const top of lp.top_logprobs) assert.ok(Object.keys(top).length >= 2);
});

await check('chat logprobs, streamed and not', async () => {
  const p = { messages: messagesFor(PROMPTS[4]), temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 3 };
  const r = await chat(p);
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 3);
    assert.ok(e.logprob <= 0);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
  }
  const streamed = [];
  for await (const chunk of await chat({ ...p, stream: true })) {
    for (const c of chunk.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
  }
  assert.deepEqual(streamed.map((e) => e.token), content.map((e) => e.token));
});

// Temperature 0: 16 clients at once must get exactly what each got alone.
for (const kind of ['completions', 'chat']) {
  await check(`${kind}: 1 vs 16 concurrent clients give identical results`, async () => {
    const run = async (p, stream) => {
      if (kind === 'completions') {
        const params = { prompt: p, temperature: 0, max_tokens: 40 };
        if (!stream) return (await completion(params)).choices[0].text;
        return (await collect(await completion({ ...params, stream: true }), completionText)).texts[0];
      }
      const params = { messages: messagesFor(p), temperature: 0, max_tokens: 40 };
      if (!stream) return (await chat(params)).choices[0].message.content;
      return (await collect(await chat({ ...params, stream: true }), chatText)).texts[0];
    };
    const alone = [];
    for (const p of PROMPTS) alone.push(await run(p, false));
    const together = await Promise.all(PROMPTS.map((p, i) => run(p, i % 2 === 1)));
    assert.deepEqual(together, alone);
  });
}

await check('errors surface as the client\'s typed exceptions', async () => {
  await assert.rejects(completion({ prompt: PROMPTS[0], max_tokens: -1 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.match(e.message, /max_tokens/);
    return true;
  });
  await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    return true;
  });
  await assert.rejects(chat({ messages: [] }), (e) => e instanceof OpenAI.BadRequestError);
  await assert.rejects(completion({ prompt: [1, ...Array(overLimit).fill(403)] }),
    (e) => e instanceof OpenAI.BadRequestError && /maximum context length/.test(e.message));
});

console.log(`all ${checks} checks passed`);
