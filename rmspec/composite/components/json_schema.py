"""`json_schema`: 1 when the response (or its first ```json fenced block) is JSON that validates
against the schema, else 0. The schema itself is checked when the composite is built."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from rmspec.composite.components.context import Context
from rmspec.composite.outcome import Item, Outcome, ok
from rmspec.errors import RmspecError
from rmspec.spec.composite_rules import JsonSchemaRule

FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def json_text(response: str, fenced: bool) -> str:
    """The text that must be JSON: the first fenced block's body when asked and present."""
    if fenced:
        found = FENCE.search(response)
        if found:
            return found.group(1)
    return response


class JsonSchema:
    needs_reference = False

    def __init__(self, schema: dict[str, Any], fenced: bool):
        import jsonschema

        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        self.validator = cls(schema)
        self.fenced = fenced

    def score(self, items: Sequence[Item]) -> list[Outcome]:
        out = []
        for item in items:
            try:
                document = json.loads(json_text(item.response, self.fenced))
            except ValueError:
                out.append(ok(0.0))  # not JSON: the rule's answer is no, not a failure to check
                continue
            out.append(ok(1.0 if self.validator.is_valid(document) else 0.0))
        return out


def load_schema(settings: JsonSchemaRule, context: Context) -> dict[str, Any]:
    if isinstance(settings.json_schema, dict):
        return settings.json_schema
    path = context.resolve(settings.json_schema)
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RmspecError(
            f"component {settings.name}: cannot read the JSON schema {path}: {exc}",
            "give a .json file holding one JSON Schema object, or the schema inline",
        ) from None
    if not isinstance(schema, dict):
        raise RmspecError(f"component {settings.name}: {path} holds no JSON object", "a schema is a JSON object")
    return schema


def build(settings: JsonSchemaRule, context: Context) -> JsonSchema:
    import jsonschema

    schema = load_schema(settings, context)
    try:
        return JsonSchema(schema, settings.fenced)
    except jsonschema.SchemaError as exc:
        raise RmspecError(
            f"component {settings.name}: the schema is not a valid JSON Schema: {exc.message}",
            "fix the schema (it is checked against its own metaschema)",
        ) from None
