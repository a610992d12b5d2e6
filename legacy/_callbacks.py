"""PySpark's DStream callbacks without a Java exception in each.

The JVM calls back into the driver's Python for every Python DStream operation of every batch
(``TransformFunction.call``: ``map``, ``transform``, ``updateStateByKey``, ``foreachRDD``...), handing it the
batch's RDDs as a ``java.util.List``. PySpark walks that list with py4j's iterator, and py4j ends an iteration
the way Java does: its last ``next()`` throws ``NoSuchElementException``. Once a SparkSession exists, PySpark's
SQL error handler converts every Java exception crossing py4j (a dozen round trips to classify it, and its
stack trace as text), so each callback paid for that one exception, on the driver, while Spark generated each
batch (the figures: docs/legacy.md and benchmarks/results/changes.md, "The legacy batch, second pass").

:func:`install` hands ``TransformFunction.call`` the list already read by index (``size()`` and ``get(i)``),
which is what the original does with it, minus the exception. Nothing else changes: the same function runs
on the same RDDs. :func:`java_values` and :func:`java_map_values` do the same for the kit's own reads of
Java collections.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install", "java_map_values", "java_values"]


def java_values(items: Any) -> list:
    """The elements of a Java list or array (py4j's ``JavaList``, ``JavaArray``), read by index.

    No iterator, so no exception at the end.
    """
    return [items[i] for i in range(len(items))]


def java_map_values(mapping: Any) -> list:
    """The values of a ``java.util.Map`` (py4j's ``JavaMap``, whose Python ``values()`` iterates), by index."""
    from py4j.java_gateway import get_method

    return java_values(get_method(mapping, "values")().toArray())


def install() -> None:
    """Make PySpark's ``TransformFunction.call`` take the JVM's RDD list by index (idempotent)."""
    from pyspark.streaming.util import TransformFunction

    original = TransformFunction.call
    if getattr(original, "reads_by_index", False):
        return

    def call(self: Any, milliseconds: int, jrdds: Any) -> Any:
        return original(self, milliseconds, java_values(jrdds))

    call.reads_by_index = True  # type: ignore[attr-defined]
    call.__doc__ = original.__doc__
    TransformFunction.call = call  # type: ignore[method-assign]  # the patch is the point
