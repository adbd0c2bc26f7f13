// The official Anthropic SDK against Weir: messages.create plain and
// streamed, messages.stream, a tool round trip and countTokens, with the
// Weir key as x-api-key. WEIR_URL, WEIR_KEY and WEIR_MODEL say where and
// what.
import Anthropic from '@anthropic-ai/sdk';
import { check, env } from './check.mjs';

const client = new Anthropic({ baseURL: env('WEIR_URL'), apiKey: env('WEIR_KEY'), maxRetries: 0 });
const model = env('WEIR_MODEL');

const m = await client.messages.create({ model, max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user', content: 'Say hello' }] });
check(m.type === 'message' && m.role === 'assistant', 'a message', m);
check(m.content[0]?.type === 'text' && m.content[0].text.length > 0, 'a text block', m.content);
check(['end_turn', 'max_tokens'].includes(m.stop_reason), 'a stop reason', m.stop_reason);
check(m.usage.input_tokens > 0 && m.usage.output_tokens > 0, 'usage reported', m.usage);

const raw = await client.messages.create({ model, max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }], stream: true });
const kinds = [];
let text = '';
for await (const ev of raw) {
  kinds.push(ev.type);
  if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
}
check(kinds[0] === 'message_start' && kinds.at(-1) === 'message_stop' && kinds.includes('message_delta'), 'the stream\'s events in order', kinds);
check(text.length > 0, 'text deltas streamed', text);

const helper = client.messages.stream({ model, max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }] });
const final = await helper.finalMessage();
check(final.content[0]?.type === 'text' && final.content[0].text.length > 0, 'messages.stream gathers a message', final);

const tools = [{ name: 'get_weather', description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
const call = await client.messages.create({ model, max_tokens: 128, tools, tool_choice: { type: 'any' },
  messages: [{ role: 'user', content: 'Weather in Paris?' }] });
const use = call.content.find((b) => b.type === 'tool_use');
check(call.stop_reason === 'tool_use' && use && use.name === 'get_weather' && use.id, 'a tool_use block', call);
const answer = await client.messages.create({ model, max_tokens: 64, tools, messages: [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: call.content },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees' }] },
] });
check(answer.content.some((b) => b.type === 'text'), 'the tool result answered', answer);

// Thinking passes through to an Anthropic platform, signed, and goes
// back to it in the next turn; a model without one refuses it, naming it.
const thinking = { type: 'enabled', budget_tokens: 1024 };
if (process.env.WEIR_NATIVE_MESSAGES === '1') {
  const thought = await client.messages.create({ model, max_tokens: 2048, thinking, messages: [{ role: 'user', content: 'Say hello' }] });
  check(thought.content[0]?.type === 'thinking' && thought.content[0].signature && thought.content[1]?.type === 'text',
    'a signed thinking block before the text', thought.content);
  const streamed = await client.messages.stream({ model, max_tokens: 2048, thinking, messages: [{ role: 'user', content: 'Say hello' }] }).finalMessage();
  check(streamed.content[0]?.type === 'thinking' && streamed.content[0].thinking.length > 0 && streamed.content[0].signature,
    'a streamed thinking block, signed', streamed.content);
  const next = await client.messages.create({ model, max_tokens: 2048, thinking, messages: [
    { role: 'user', content: 'Say hello' }, { role: 'assistant', content: thought.content }, { role: 'user', content: 'Again' }] });
  check(next.content.some((b) => b.type === 'text'), 'a conversation with thinking blocks answered', next.content);
} else {
  let refused;
  try {
    await client.messages.create({ model, max_tokens: 2048, thinking, messages: [{ role: 'user', content: 'Say hello' }] });
  } catch (err) {
    refused = err;
  }
  check(refused instanceof Anthropic.BadRequestError && /thinking/.test(refused.message), 'thinking refused without an Anthropic platform', refused);
}

const count = await client.messages.countTokens({ model, messages: [{ role: 'user', content: 'Say hello' }] });
check(count.input_tokens > 0, 'countTokens counts', count);
console.log('anthropic: all checks passed');
