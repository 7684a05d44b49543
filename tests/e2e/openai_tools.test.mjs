// Tool calling through the official `openai` npm client: tool_choice "required" and a named
// function, non-streamed and streamed (the client's own stream accumulation of tool-call
// deltas), and "auto" with and without --enable-auto-tool-choice.
// Usage: node openai_tools.test.mjs <base url> <model> <auto enabled: 0|1>
// Prints one `RESULT {"tool": name, "arguments": text}` line per returned call, which
// tests/test_server_tool_calls.py validates against the tool's parameters schema with
// python3-jsonschema. Exits non-zero on the first failed check.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, model, autoEnabled] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'unused', maxRetries: 0 });

// Tight schemas (enums, bounded integers) so that a tiny model's calls always finish.
export const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', enum: ['Paris', 'Tokyo', 'Lima'] },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      parameters: {
        type: 'object',
        properties: {
          a: { type: 'integer', minimum: 0, maximum: 99 },
          b: { type: 'integer', minimum: 0, maximum: 99 },
          exact: { type: 'boolean' },
        },
        required: ['a', 'b', 'exact'],
        additionalProperties: false,
      },
    },
  },
];
const NAMES = TOOLS.map((t) => t.function.name);
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

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

function report(calls) {
  for (const c of calls) {
    assert.equal(c.type, 'function');
    assert.match(c.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
    assert.ok(NAMES.includes(c.function.name), c.function.name);
    assert.equal(typeof c.function.arguments, 'string');
    console.log(`RESULT ${JSON.stringify({ tool: c.function.name, arguments: c.function.arguments })}`);
  }
}

const base = { model, messages, tools: TOOLS, temperature: 1.0, max_tokens: 120 };

for (const seed of [1, 2, 3]) {
  // One call (parallel_tool_calls false): a tiny model would otherwise chain calls until
  // max_tokens.
  const required = { tool_choice: 'required', parallel_tool_calls: false };
  await check(`required, seed ${seed}: tool_calls, finish_reason tool_calls`, async () => {
    const r = await client.chat.completions.create({ ...base, seed, ...required });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, '');
    assert.equal(c.message.tool_calls.length, 1);
    report(c.message.tool_calls);
  });
  await check(`required streamed, seed ${seed}: same calls as non-streamed`, async () => {
    const full = await client.chat.completions.create({ ...base, seed, ...required });
    const stream = client.chat.completions.stream({ ...base, seed, ...required });
    let sawName = 0;
    let sawArgs = 0;
    stream.on('chunk', (chunk) => {
      for (const t of chunk.choices[0]?.delta?.tool_calls ?? []) {
        if (t.id !== undefined) {
          // The first delta of a call carries id, type and name, no arguments yet.
          assert.equal(t.type, 'function');
          assert.ok(t.function.name);
          sawName++;
        } else {
          assert.equal(typeof t.function.arguments, 'string');
          sawArgs++;
        }
      }
    });
    const done = await stream.finalChatCompletion();
    const c = done.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    const got = c.message.tool_calls.map((t) => [t.function.name, t.function.arguments]);
    const want = full.choices[0].message.tool_calls.map((t) => [t.function.name, t.function.arguments]);
    assert.deepEqual(got, want);
    assert.equal(sawName, want.length);
    assert.ok(sawArgs >= want.length);
    report(c.message.tool_calls);
  });
  for (const name of NAMES) {
    const named = { type: 'function', function: { name } };
    await check(`named ${name}, seed ${seed}: one call to it, finish_reason stop`, async () => {
      const r = await client.chat.completions.create({ ...base, seed, tool_choice: named });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop');
      assert.equal(c.message.tool_calls.length, 1);
      assert.equal(c.message.tool_calls[0].function.name, name);
      report(c.message.tool_calls);
      const s = await client.chat.completions
        .stream({ ...base, seed, tool_choice: named })
        .finalChatCompletion();
      assert.deepEqual(s.choices[0].message.tool_calls.map((t) => t.function),
        c.message.tool_calls.map((t) => t.function));
    });
  }
}

await check('required with parallel calls: every finished list is calls', async () => {
  let finished = 0;
  for (const seed of [11, 12, 13, 14]) {
    const r = await client.chat.completions.create({
      ...base, seed, max_tokens: 400, tool_choice: 'required',
    });
    const c = r.choices[0];
    if (c.finish_reason === 'length') {
      // Cut inside the list: no calls, the text as content.
      assert.deepEqual(c.message.tool_calls, []);
      continue;
    }
    assert.equal(c.finish_reason, 'tool_calls');
    assert.ok(c.message.tool_calls.length >= 1);
    report(c.message.tool_calls);
    finished++;
  }
  console.log(`parallel: ${finished} of 4 finished`);
});

await check('tool_choice errors are 400s with vLLM\'s messages', async () => {
  await assert.rejects(
    client.chat.completions.create({ ...base, tool_choice: { type: 'function', function: { name: 'nope' } } }),
    (e) => e.status === 400 && /does not match any of the specified `tools`/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model, messages, tool_choice: 'required' }),
    (e) => e.status === 400 && /`tools` must be set/.test(e.message));
});

if (autoEnabled === '1') {
  await check('auto with a parser: a well-formed response', async () => {
    for (const stream of [false, true]) {
      const r = stream
        ? await client.chat.completions.stream({ ...base, seed: 1, tool_choice: 'auto' }).finalChatCompletion()
        : await client.chat.completions.create({ ...base, seed: 1, tool_choice: 'auto' });
      const c = r.choices[0];
      assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason), c.finish_reason);
      assert.equal(c.message.role, 'assistant');
      if (c.finish_reason === 'tool_calls') report(c.message.tool_calls);
      else assert.equal(typeof c.message.content, 'string');
    }
  });
} else {
  await check('auto without --enable-auto-tool-choice: 400', async () => {
    for (const params of [{ tool_choice: 'auto' }, {}]) {
      await assert.rejects(client.chat.completions.create({ ...base, ...params }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError);
        assert.equal(e.message,
          '400 "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set');
        return true;
      });
    }
    // tool_choice "none" keeps working.
    const r = await client.chat.completions.create({ ...base, tool_choice: 'none' });
    assert.equal(typeof r.choices[0].message.content, 'string');
  });
}

console.log(`all ${checks} checks passed`);
