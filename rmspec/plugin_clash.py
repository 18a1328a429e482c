"""One rule for every registry that takes things from outside rmspec (approaches, scorer kinds,
benchmark kinds, reward components): a name belongs to one module. A plugin that names a thing as a
shipped one (or as another plugin) is refused with both modules named, never silently put in its
place: `rmspec.approaches`, `rmspec.inference.scorers`, `rmspec.evaluate.registry` and
`rmspec.composite.components` ask `refuse_clash` before they register. Light: no imports.
"""

from __future__ import annotations

from rmspec.errors import RmspecError


class RegistryClash(RmspecError, ValueError):
    """Two modules give one name: exit 2, naming both (a ValueError too, for `register` callers)."""


def refuse_clash(what: str, name: str, registered: str | None, incoming: str, where: str = "") -> None:
    """Raise when `name` (a `what`: "approach", "scorer kind", ...) is already registered by module
    `registered` and module `incoming` (named at `where`: an entry point, an environment variable)
    wants it too. The same module registering again is no clash."""
    if registered is None or registered == incoming:
        return
    source = f" ({where})" if where else ""
    raise RegistryClash(
        f"two modules give the {what} {name!r}: {registered} and {incoming}{source}",
        f"rename the {what} in {incoming} (its name must differ from every shipped {what} and every "
        "other plugin's), or uninstall the package that declares it",
    )
