"""Selector operators and the selector error, shared by label and field selectors.

The operator spellings are those of ``k8s.io/apimachinery/pkg/selection``; label selectors
(:mod:`kubescale.objects.selectors`) use all of them, field selectors
(:mod:`kubescale.objects.field_selectors`) the equality ones. Both raise :class:`SelectorError` with
upstream's wording.
"""

from __future__ import annotations

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOT_EQUALS",
    "NOT_IN",
    "SelectorError",
]


class SelectorError(ValueError):
    """A selector string or ``metav1.LabelSelector`` that upstream would reject."""


IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"
