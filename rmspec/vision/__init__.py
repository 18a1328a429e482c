"""Images in every stage: decoding and checks (images), VLM reward heads (models), the tiny offline
Qwen2-VL (tiny), M-RoPE prompt-once packing (packing). The package's ``__init__`` imports nothing, so
the light side may import the torch-free modules (images, tokens) alone."""
