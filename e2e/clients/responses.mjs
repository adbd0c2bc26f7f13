// The official openai SDK's Responses API against Weir: responses.create
// plain and streamed, the responses.stream helper, and a function-tool
// round trip. WEIR_URL, WEIR_KEY and WEIR_MODEL say where and what.
import OpenAI from 'openai';
import { check, env } from './check.mjs';

const client = new OpenAI({ baseURL: env('WEIR_URL') + '/v1', apiKey: env('WEIR_KEY'), maxRetries: 0 });
const model = env('WEIR_MODEL');

const r = await client.responses.create({ model, input: 'Say hello', instructions: 'Be brief.' });
check(r.object === 'response' && r.status === 'completed', 'a completed response', r);
check(typeof r.output_text === 'string' && r.output_text.length > 0, 'output_text has the answer', r.output_text);
check(r.usage && r.usage.input_tokens > 0 && r.usage.output_tokens > 0, 'usage reported', r.usage);

let deltas = '';
let completed = null;
let last = -1;
let ordered = true;
const stream = await client.responses.create({ model, input: [{ role: 'user', content: 'Say hello' }], stream: true });
for await (const ev of stream) {
  ordered &&= ev.sequence_number > last;
  last = ev.sequence_number;
  if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  if (ev.type === 'response.completed') completed = ev.response;
}
check(ordered, 'sequence numbers rise', last);
check(deltas.length > 0, 'text deltas streamed', deltas);
check(completed && completed.usage && completed.usage.output_tokens > 0, 'response.completed carries usage', completed);

const helper = client.responses.stream({ model, input: 'Say hello' });
let helperText = '';
helper.on('response.output_text.delta', (ev) => { helperText += ev.delta; });
const final = await helper.finalResponse();
check(helperText.length > 0 && final.output_text === helperText, 'responses.stream gathers the same text', { helperText, final: final.output_text });

const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: false }];
const call = await client.responses.create({ model, input: 'Weather in Paris?', tools, tool_choice: 'required' });
const fc = call.output.find((o) => o.type === 'function_call');
check(fc && fc.name === 'get_weather' && fc.call_id, 'a function_call item with its call_id', call.output);
const answer = await client.responses.create({
  model, tools,
  input: [
    { role: 'user', content: 'Weather in Paris?' },
    { type: 'function_call', call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
    { type: 'function_call_output', call_id: fc.call_id, output: '{"temperature": 21}' },
  ],
});
check(answer.status === 'completed' && answer.output_text.length > 0, 'the tool result answered', answer);
console.log('responses: all checks passed');
