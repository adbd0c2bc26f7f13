// The Vercel AI SDK's default OpenAI model (the Responses API) against
// Weir: generateText and streamText. WEIR_URL, WEIR_KEY and WEIR_MODEL
// say where and what.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import { check, env } from './check.mjs';

const openai = createOpenAI({ baseURL: env('WEIR_URL') + '/v1', apiKey: env('WEIR_KEY') });
const model = openai(env('WEIR_MODEL'));

const g = await generateText({ model, prompt: 'Say hello', maxRetries: 0 });
check(g.text.length > 0, 'generateText answers', g.text);
check(g.usage.outputTokens > 0, 'usage reported', g.usage);

const s = streamText({ model, prompt: 'Say hello', maxRetries: 0 });
let text = '';
for await (const part of s.textStream) text += part;
check(text.length > 0, 'streamText streams', text);
console.log('vercel: all checks passed');
