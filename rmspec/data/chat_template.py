"""model.chat_template: a chat template that replaces the tokenizer's own, from a Jinja file or inline.

Set on the tokenizer right after loading (data commands and training alike), so the rows are laid out
with it, and saved with RUN/model's tokenizer (chat_template.jinja): `rmspec score`, `rmspec serve`,
`rmspec eval` and plain transformers then render conversations with the same template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmspec.errors import DataError

INLINE_MARKERS = ("{%", "{{")


def is_inline(value: str) -> bool:
    """A template itself (Jinja statements or expressions), not the path to one."""
    return any(marker in value for marker in INLINE_MARKERS)


def read_chat_template(value: str, base_dir: Path) -> str:
    """The template text of model.chat_template: inline as written, else the file it names (relative
    paths resolve against the spec's folder)."""
    if is_inline(value):
        return value
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if not path.is_file():
        raise DataError(
            f"model.chat_template: no file {path} (and the value is not a template: it has no "
            f"{' or '.join(INLINE_MARKERS)})",
            "give the path of a Jinja file (relative to the spec) or write the template inline",
        )
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise DataError(f"model.chat_template: {path} is empty", "put the Jinja chat template in the file")
    return text


def use_chat_template(tokenizer: Any, model: Any, base_dir: Path) -> Any:
    """Give `tokenizer` the spec's model.chat_template (no change when unset); the template must compile."""
    value = getattr(model, "chat_template", None)
    if not value:
        return tokenizer
    template = read_chat_template(value, base_dir)
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        ImmutableSandboxedEnvironment().parse(template)
    except Exception as exc:  # jinja2's TemplateSyntaxError: say where, not a traceback
        line = getattr(exc, "lineno", None)
        raise DataError(
            f"model.chat_template does not compile{f' (line {line})' if line else ''}: {exc}",
            "fix the Jinja syntax; transformers renders the template with jinja2",
        ) from None
    tokenizer.chat_template = template
    return tokenizer
