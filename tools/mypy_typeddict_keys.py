"""A mypy plugin: a ``.get("key")`` on a TypedDict must name one of its keys (issue 28).

``mypy --strict`` checks ``obj["key"]`` against a TypedDict's keys, but lets ``obj.get("key")``
through for any literal key (it returns ``object`` for an unknown one, an error only where the
value is then used as something else). kubescale reads most API-object fields with ``.get`` (a
field the API server may leave out), so without this a misspelt field name in a ``.get`` of a
typed object goes unseen. The hook wraps mypy's own ``TypedDict.get`` callback and adds an error
``TypedDict "Pod" has no key "metdata"`` for a literal key the TypedDict does not declare;
everything else is mypy's answer unchanged.

Enabled in ``pyproject.toml`` (``[tool.mypy] plugins``); ``tests/platform/test_typed_objects.py``
shows it catching a planted misspelling.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.plugin import MethodContext, Plugin
from mypy.plugins.common import try_getting_str_literals
from mypy.plugins.default import typed_dict_get_callback
from mypy.types import Type, TypedDictType, get_proper_type

_GET = "typing.Mapping.get"


def _known_keys_only(ctx: MethodContext) -> Type:
    receiver = get_proper_type(ctx.type)
    if isinstance(receiver, TypedDictType) and ctx.arg_types and len(ctx.arg_types[0]) == 1:
        keys = try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or ()
        for key in keys:
            if key not in receiver.items:
                name = receiver.fallback.type.name
                ctx.api.fail(f'TypedDict "{name}" has no key "{key}" (in .get)', ctx.context)
    return typed_dict_get_callback(ctx)


class TypedDictKeys(Plugin):
    """The plugin (see the module docstring)."""

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _known_keys_only if fullname == _GET else None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point."""
    del version
    return TypedDictKeys
