"""Typed API objects and the value types they carry: the ground floor with :mod:`kubescale.base`.

kubescale keeps API objects as the JSON dicts the API server sent. The :class:`typing.TypedDict`
types here describe, kind by kind and with the Kubernetes API's field names, exactly the fields
kubescale reads, so ``mypy --strict`` checks every field name; a TypedDict is the same dict at
run time, so nothing is converted or copied. One module per kind (``pod``, ``node``, ``vpa``, …)
so a cache could later keep only the fields its kind's module lists. Shared pieces:
:mod:`~kubescale.objects.meta` (``ObjectMeta``, ``OwnerReference``, ``metav1.LabelSelector``,
conditions) and :mod:`~kubescale.objects.containers` (``Container``, ``ResourceRequirements``).

:mod:`~kubescale.objects.views` holds the thin read-only views (``Meta``, ``OwnerRef``,
``ObjectRef``) that read the fields everyone needs with the same edge cases (a missing or
malformed field reads empty). The value types: :mod:`~kubescale.objects.quantities`
(``resource.Quantity``), :mod:`~kubescale.objects.selectors` (label and field selectors, pure).
Times and Go durations are in :mod:`kubescale.base.times` and :mod:`kubescale.base.go_time`.

This package may import :mod:`kubescale.base` and nothing else of kubescale.
"""
