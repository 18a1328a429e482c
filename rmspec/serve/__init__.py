"""`rmspec serve`: a trained reward model (or generative judge) over HTTP, for RL trainers.

Only the HTTP side lives here; scoring is rmspec.inference's engine, so a served score equals
`rmspec score` and `rmspec eval` for the same text. Modules:

- `server`: bind checks (loopback unless a token is set), uvicorn, SIGTERM drain;
- `app`: the FastAPI app: auth, limits, errors, /health, /metrics, the protocol routers;
- `batcher`: dynamic batching across concurrent requests (token budget, short wait, bounded queue);
- `service`: the loaded engine behind the batcher (normalization, activation, generation);
- `request_io`: request reading (body limit, JSON, field-naming 422s) and the error type;
- `images`: a request's pictures (count, bytes, header-read pixel budget, then decoding, off the loop);
- `metrics`: Prometheus counters and histograms;
- one module per protocol: `openrlhf` (/get_reward), `vllm` (/classify, /pooling),
  `openai` (/v1/chat/completions, /v1/models).

torch/transformers/fastapi load only when a server is built.
"""

# Default limits, sized for OpenRLHF <= 0.9, which posts a whole rollout batch in one request:
# rollout_batch_size 1,024 prompts x n_samples_per_prompt (8 to 16 for GRPO) = up to 16,384
# queries; with its prompt each query is about 12 KB of JSON at prompt_max_len + generate_max_len
# = 2,048 tokens, so 16,384 x 12 KB = 192 MiB. The queue holds at least one such request.
MAX_ITEMS = 16384
MAX_BODY_MB = 256.0

# A request's pictures (a model that reads images): at most 16, and 64 decoded megapixels in all (one
# 8k x 8k picture, or 16 of 4 MP), read from their headers before any is decoded: 192 MB of RGB at most
# per request being decoded. An http(s) image (--allow-image-urls) has 10 s for its whole download.
MAX_IMAGES = 16
MAX_REQUEST_MEGAPIXELS = 64.0
IMAGE_URL_TIMEOUT = 10.0
