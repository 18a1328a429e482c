"""Every field of the spec models as "Class.field", walked from Spec (the field walker and the spec
reference test share it)."""

from __future__ import annotations

import typing

from pydantic import BaseModel

from rmspec.spec.root import Spec


def models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in models_in(a)]


def every_field() -> list[str]:
    seen: set[type] = set()
    out: list[str] = []

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, field in model.model_fields.items():
            out.append(f"{model.__name__}.{name}")
            for sub in models_in(field.annotation):
                walk(sub)

    walk(Spec)
    return out
