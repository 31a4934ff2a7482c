// The official `ollama` and `openai` npm clients against a cllm started with CLLM_API_KEY:
// with the key they work, without it (or with a wrong one) they get a 401.
//
// Usage: node check_key.mjs BASE_URL KEY [MODEL]
// Prints one line per check ("PASS name" or "FAIL name: reason") and exits 1 if any failed.

import { Ollama } from 'ollama'
import OpenAI from 'openai'

const [baseUrl, key, modelArg] = process.argv.slice(2)
if (!baseUrl || !key) {
  console.error('usage: node check_key.mjs BASE_URL KEY [MODEL]')
  process.exit(2)
}
const MODEL = modelArg ?? 'tiny'
let failed = 0

async function check(name, fn) {
  try {
    await fn()
    console.log(`PASS ${name}`)
  } catch (err) {
    failed += 1
    console.log(`FAIL ${name}: ${String(err && err.message ? err.message : err).replace(/\n/g, ' ')}`)
  }
}

async function refused(call, status = 401) {
  try {
    await call()
  } catch (err) {
    const got = err.status_code ?? err.status
    if (got !== status) throw new Error(`expected ${status}, got ${got}: ${err.message}`)
    return
  }
  throw new Error('the call succeeded without the key')
}

const keyed = new Ollama({ host: baseUrl, headers: { Authorization: `Bearer ${key}` } })
const bare = new Ollama({ host: baseUrl })
await check('ollama with the key', async () => {
  const { models } = await keyed.list()
  if (!models.some((m) => m.name.startsWith(MODEL))) throw new Error(`${MODEL} not listed`)
  const out = await keyed.generate({ model: MODEL, prompt: 'Hi', options: { temperature: 0, num_predict: 4 } })
  if (out.eval_count !== 4) throw new Error(`eval_count ${out.eval_count}`)
})
await check('ollama without the key', () => refused(() => bare.list()))

const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: key, maxRetries: 0, timeout: 60_000 })
const wrong = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'wrong', maxRetries: 0, timeout: 60_000 })
await check('openai with the key', async () => {
  const out = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 4,
    temperature: 0,
  })
  if (out.usage.completion_tokens !== 4) throw new Error(`completion_tokens ${out.usage.completion_tokens}`)
})
await check('openai with a wrong key', () => refused(() => wrong.models.list()))

process.exit(failed ? 1 : 0)
