"""How a canonical record becomes the text and tokens the model sees.

Three layouts, chosen once per tokenizer:

- `template`: the tokenizer has a chat template (and mapping.chat_template is not `plain`): the
  conversation is rendered with it, the response located inside the rendering;
- `pair`: an encoder (BERT family: a CLS and a SEP token, no chat template): prompt and response
  are encoded as a text pair, [CLS] prompt [SEP] response [SEP], so truncation can cut the
  prompt and never the response;
- `plain`: anything else: "User: ...\\n\\nAssistant: ..." with the tokenizer's own special tokens
  and an EOS after the response.

Tool turns (rmspec.messages `Rules.tools`): a chat template renders them itself, and `check_tools`
refuses a conversation whose rendering lacks a tool call or result (a template without tool
support drops them silently). The plain form (and the pair layout's prompt) writes a tool result
as "Tool (name): result" and an assistant's calls as lines "calls name({"arg": ...})" after its text.

Every sequence is split into five token segments, `head + prompt + mid + body + tail`: `head`,
`mid` and `tail` are special/format tokens that truncation never touches, `prompt` can be cut
from the left and `body` (the response) from the right. The last token is always the tail's, so
the reward read at the last token sits at the end of the response whatever was cut.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rmspec.errors import DataError
from rmspec.messages import Invalid, Problem, for_template, has_tools, missing_tool_texts

TEMPLATE, PAIR, PLAIN = "template", "pair", "plain"


NAMES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def plain_turn(m: dict[str, Any]) -> str:
    """One turn in the plain form: "User: ...", a tool result as "Tool (name): result", an
    assistant's tool calls as lines "calls name(arguments as JSON)" after its text."""
    if m["role"] == "tool":
        return f"Tool ({m['name']}): {m['content']}" if m.get("name") else f"Tool: {m['content']}"
    calls = [plain_call(c) for c in m.get("tool_calls") or []]
    text = "\n".join([m["content"], *calls] if m["content"] else calls)
    return f"{NAMES[m['role']]}: {text}"


def plain_call(call: dict[str, Any]) -> str:
    fn = call["function"]
    args = fn["arguments"]
    return f"calls {fn['name']}({args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)})"


def plain_conversation(messages: list[dict[str, Any]]) -> str:
    return "\n\n".join(plain_turn(m) for m in messages)


@dataclass
class Segments:
    head: list[int]
    prompt: list[int]
    mid: list[int]
    body: list[int]
    tail: list[int]
    # token type per segment (encoders only; None elsewhere)
    types: tuple[int, int, int, int, int] | None = None

    def __len__(self) -> int:
        return len(self.head) + len(self.prompt) + len(self.mid) + len(self.body) + len(self.tail)

    def ids(self) -> list[int]:
        return self.head + self.prompt + self.mid + self.body + self.tail

    def type_ids(self) -> list[int] | None:
        if self.types is None:
            return None
        parts = (self.head, self.prompt, self.mid, self.body, self.tail)
        return [t for part, t in zip(parts, self.types) for _ in part]


@dataclass
class Turns:
    """A generative conversation as token pieces; `learn` marks the pieces the loss is taken on."""

    pieces: list[list[int]] = field(default_factory=list)
    learn: list[bool] = field(default_factory=list)


class Layout:
    def __init__(
        self, tokenizer: Any, chat_template: str = "auto", architecture: str | None = None, pictures: bool = False
    ):
        self.tok = tokenizer
        # A vision-language model's layout: each picture's place in the text (rmspec.vision.marks.PICTURE)
        # is encoded as the id rmspec.vision.marks.PICTURE_ID, which no text encodes to.
        self.pictures = pictures
        if pictures:  # and a model's image tokens written in the text are text (rmspec.vision.marks.IMAGE_TOKENS)
            import re

            from rmspec.vision.marks import image_tokens_of

            found = image_tokens_of(tokenizer)
            self._image_tokens = re.compile("|".join(re.escape(t) for t in found)) if found else None
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if chat_template == "tokenizer" and not has_template:
            raise DataError(
                "data.mapping.chat_template is 'tokenizer' but this tokenizer has no chat template",
                "use chat_template: auto or plain, or a chat model's tokenizer",
            )
        is_encoder = architecture == "encoder" or (
            architecture is None
            and getattr(tokenizer, "cls_token_id", None) is not None
            and getattr(tokenizer, "sep_token_id", None) is not None
        )
        if has_template and chat_template != "plain":
            self.kind = TEMPLATE
        elif is_encoder:
            self.kind = PAIR
        else:
            self.kind = PLAIN
        self.special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
        self._frames()

    # ------------------------------------------------------------ special-token frames

    def _frames(self) -> None:
        """Find the special tokens the tokenizer adds around one text and around a pair, by probing."""
        enc = lambda text, specials=False: self.tok(text, add_special_tokens=specials)["input_ids"]  # noqa: E731
        x, y = enc("x"), enc("y")
        single = enc("x", True)
        i = _find(single, x)
        self.single_head, self.single_tail = single[:i], single[i + len(x) :]
        self.pair_head = self.pair_mid = self.pair_tail = []
        self.pair_types = None
        if self.kind == PAIR:
            out = self.tok("x", "y", add_special_tokens=True)
            ids = out["input_ids"]
            i = _find(ids, x)
            j = _find(ids, y, i + len(x))
            self.pair_head, self.pair_mid, self.pair_tail = ids[:i], ids[i + len(x) : j], ids[j + len(y) :]
            tt = out.get("token_type_ids")
            if tt is not None:
                self.pair_types = (
                    tt[0] if i else tt[i],
                    tt[i],
                    tt[i + len(x)] if j > i + len(x) else tt[i],
                    tt[j],
                    tt[-1],
                )
        eos = getattr(self.tok, "eos_token_id", None)
        self.plain_tail = list(self.single_tail)
        if eos is not None and eos not in self.plain_tail:
            self.plain_tail.append(eos)

    # ------------------------------------------------------------ texts

    def prompt_texts(self, prompts: list[list[dict[str, str]]]) -> list[str]:
        """The prompt as the model sees it, before the response."""
        if self.kind == TEMPLATE:
            texts = [self._render(p, generation_prompt=True) for p in prompts]
            for p, t in zip(prompts, texts):  # callers check per row first; never lay out a dropped tool turn
                if has_tools(p) and missing_tool_texts(p, t):
                    raise DataError(
                        f"{self.template_name()} renders a conversation without its tool calls or results",
                        "give a chat template that lays out tool turns (model.chat_template), or "
                        "data.mapping.chat_template: plain",
                    )
            return texts
        if self.kind == PAIR:
            return [
                p[0]["content"] if len(p) == 1 and p[0]["role"] == "user" else plain_conversation(p) for p in prompts
            ]
        return [(plain_conversation(p) + "\n\n" if p else "") + "Assistant:" for p in prompts]

    def template_name(self) -> str:
        return f"the chat template of {getattr(self.tok, 'name_or_path', '') or 'the tokenizer'}"

    def check_tools(self, messages: list[dict[str, Any]], field: str, whole: bool = False) -> None:
        """Raise `Invalid` (TEMPLATE_DROPS_TOOLS, at the message's field path) when the chat template
        renders `messages` (a prompt, or a `whole` conversation) without one of its tool call names,
        argument values or tool results. The plain and pair forms write every one of them."""
        if self.kind != TEMPLATE or not has_tools(messages):
            return
        missing = missing_tool_texts(messages, self._render(messages, generation_prompt=not whole))
        if missing:
            where, what = missing[0]
            raise Invalid(
                Problem.TEMPLATE_DROPS_TOOLS,
                f"{field}.{where}",
                f"{self.template_name()} renders this conversation without {what[:60]!r}: it does not lay "
                "out tool calls or tool results (give one that does with model.chat_template, or "
                "data.mapping.chat_template: plain)",
                field,
            )

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool = False) -> str:
        try:
            return self.tok.apply_chat_template(
                for_template(messages), tokenize=False, add_generation_prompt=generation_prompt
            )
        except Exception as exc:
            raise DataError(
                f"the tokenizer's chat template failed on a conversation: {' '.join(str(exc).split())[:200]}",
                "check the roles (some templates refuse a system turn or two user turns in a row), "
                "or set data.mapping.chat_template: plain",
            ) from None

    def split_response(
        self, prompts: list[list[dict[str, str]]], responses: list[str]
    ) -> list[tuple[str, str, str, str]]:
        """Per row: (prompt text, mid text, response text, tail text) whose concatenation is the full rendering."""
        pre = self.prompt_texts(prompts)
        if self.kind == PAIR:
            return [(p, "", r, "") for p, r in zip(pre, responses)]
        if self.kind == PLAIN:
            return [(p, "", " " + r if r else "", "") for p, r in zip(pre, responses)]
        out = []
        for p_msgs, p_text, resp in zip(prompts, pre, responses):
            full = self._render([*p_msgs, {"role": "assistant", "content": resp}])
            if full.startswith(p_text):
                rest, start = full[len(p_text) :], p_text
            else:  # templates that change earlier turns once a reply exists: split where the reply is
                cut = full.rfind(resp.strip()) if resp.strip() else -1
                if cut < 0:
                    raise DataError(
                        "the chat template does not reproduce the response text, so the response cannot be located",
                        "set data.mapping.chat_template: plain",
                    )
                rest, start = full[cut:], full[:cut]
            core = resp.strip()
            j = rest.find(core) if core else 0
            if j < 0:
                raise DataError(
                    "the chat template does not reproduce the response text, so the response cannot be located",
                    "set data.mapping.chat_template: plain",
                )
            out.append((start, rest[:j], rest[j : j + len(core)], rest[j + len(core) :]))
        return out

    # ------------------------------------------------------------ tokens

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text (no special tokens added); each distinct text is encoded once, in one batch.
        With ``pictures``, each picture's place is the one id PICTURE_ID and the text around it is encoded
        on its own (as a processor splits the text at its image tokens)."""
        if self.pictures:
            from rmspec.vision.marks import PICTURE, PICTURE_ID

            if any(PICTURE in t for t in texts):
                pieces = [t.split(PICTURE) for t in texts]
                flat = self.encode([p for row in pieces for p in row])
                out, k = [], 0
                for row in pieces:
                    marked: list[int] = []
                    for j in range(len(row)):
                        marked += ([PICTURE_ID] if j else []) + flat[k + j]
                    out.append(marked)
                    k += len(row)
                return out
            hits = [
                bool(t) and self._image_tokens is not None and self._image_tokens.search(t) is not None for t in texts
            ]
            if any(hits):
                plain = iter(self.encode([t for t, hit in zip(texts, hits) if not hit]))
                return [self._as_text(t) if hit else next(plain) for t, hit in zip(texts, hits)]
        unique = list(dict.fromkeys(t for t in texts if t))
        if not unique:
            return [[] for _ in texts]
        backend = getattr(self.tok, "backend_tokenizer", None)
        if backend is not None:  # the Rust tokenizer directly: same ids, far less Python per text
            # A padded or truncating tokenizer call (a processor's batch) leaves the backend padding or
            # truncating until the next tokenizer call; switched off here, or these ids come back padded.
            if backend.padding is not None:
                backend.no_padding()
            if backend.truncation is not None:
                backend.no_truncation()
            ids = [e.ids for e in backend.encode_batch(unique, add_special_tokens=False)]
        else:
            ids = self.tok(unique, add_special_tokens=False)["input_ids"]
        table = dict(zip(unique, ids))
        return [list(table[t]) if t else [] for t in texts]

    def _as_text(self, text: str) -> list[int]:
        """A text holding an image token: the token encoded as its characters (not the special id a processor
        would expand), the rest as usual."""
        assert self._image_tokens is not None
        ids: list[int] = []
        start = 0
        for m in self._image_tokens.finditer(text):
            ids += self.encode([text[start : m.start()]])[0]
            ids += self.tok(m.group(), add_special_tokens=False, split_special_tokens=True)["input_ids"]
            start = m.end()
        return ids + self.encode([text[start:]])[0]

    def segments(self, prompts: list[list[dict[str, str]]], responses: list[str]) -> list[Segments]:
        return self.segments_many(prompts, [responses])[0]

    def segments_many(self, prompts: list[list[dict[str, str]]], sides: list[list[str]]) -> list[list[Segments]]:
        """Segments for several responses per prompt (chosen and rejected), all texts encoded in one batch."""
        parts = [self.split_response(prompts, responses) for responses in sides]
        texts = [piece for side in parts for row in side for piece in row]
        ids = self.encode(texts)
        return [
            self._assemble(
                [ids[4 * (k * len(prompts) + i) : 4 * (k * len(prompts) + i) + 4] for i in range(len(prompts))]
            )
            for k in range(len(sides))
        ]

    def _assemble(self, rows: list[list[list[int]]]) -> list[Segments]:
        out = []
        for p, m, b, t in rows:
            if self.kind == PAIR:
                out.append(
                    Segments(list(self.pair_head), p, list(self.pair_mid), b, list(self.pair_tail), self.pair_types)
                )
            elif self.kind == PLAIN:
                out.append(Segments(list(self.single_head), p, m, b, list(self.plain_tail)))
            else:
                # Leading special tokens of the rendering (BOS) stay when the prompt is cut.
                k = 0
                while k < len(p) and p[k] in self.special_ids:
                    k += 1
                out.append(Segments(p[:k], p[k:], m, b, t))
        return out

    def turns(self, conversation: list[dict[str, str]]) -> Turns:
        """A whole conversation as pieces; assistant replies (and their end tokens) are learned."""
        turns = Turns()
        if self.kind == TEMPLATE:
            previous = ""
            for k, msg in enumerate(conversation):
                if msg["role"] == "assistant":
                    header = self._render(conversation[:k], generation_prompt=True) if k else ""
                    upto = self._render(conversation[: k + 1])
                    if not header.startswith(previous) or not upto.startswith(header):
                        raise DataError(
                            "the chat template renders earlier turns differently as the conversation grows",
                            "set data.mapping.chat_template: plain",
                        )
                    turns.pieces += self.encode([header[len(previous) :], upto[len(header) :]])
                    turns.learn += [False, True]
                elif msg["role"] == "tool" and k + 1 < len(conversation) and conversation[k + 1]["role"] == "tool":
                    continue  # templates group consecutive tool results: one piece, rendered after the last
                else:
                    upto = self._render(conversation[: k + 1])
                    if not upto.startswith(previous):
                        raise DataError(
                            "the chat template renders earlier turns differently as the conversation grows",
                            "set data.mapping.chat_template: plain",
                        )
                    turns.pieces += self.encode([upto[len(previous) :]])
                    turns.learn.append(False)
                previous = upto
            return turns
        turns.pieces.append(list(self.single_head))
        turns.learn.append(False)
        for k, msg in enumerate(conversation):
            sep = "\n\n" if k else ""
            if msg["role"] == "assistant":
                said = plain_turn(msg)[len("Assistant: ") :]  # its text, then its tool calls
                head_text, body = self.encode([f"{sep}Assistant:", " " + said])
                turns.pieces += [head_text, body + list(self.plain_tail)]
                turns.learn += [False, True]
            else:
                turns.pieces += self.encode([f"{sep}{plain_turn(msg)}"])
                turns.learn.append(False)
        return turns


def _find(seq: list[int], sub: list[int], start: int = 0) -> int:
    for i in range(start, len(seq) - len(sub) + 1):
        if seq[i : i + len(sub)] == sub:
            return i
    raise DataError(
        "could not find where this tokenizer puts its special tokens (probe failed)",
        "use a tokenizer from transformers' AutoTokenizer",
    )
