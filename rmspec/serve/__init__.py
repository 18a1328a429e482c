"""`rmspec serve`: a trained reward model (or generative judge) over HTTP, for RL trainers.

Only the HTTP side lives here; scoring is rmspec.inference's engine, so a served score equals
`rmspec score` and `rmspec eval` for the same text. Modules:

- `server`: bind checks (loopback unless a token is set), uvicorn, SIGTERM drain;
- `app`: the FastAPI app: auth, limits, errors, /health, /metrics, the protocol routers;
- `batcher`: dynamic batching across concurrent requests (token budget, short wait, bounded queue);
- `service`: the loaded engine behind the batcher (normalization, activation, generation);
- `request_io`: request reading (body limit, JSON, field-naming 422s) and the error type;
- `metrics`: Prometheus counters and histograms;
- one module per protocol: `openrlhf` (/get_reward), `vllm` (/classify, /pooling),
  `openai` (/v1/chat/completions, /v1/models).

torch/transformers/fastapi load only when a server is built.
"""
