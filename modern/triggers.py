"""Triggers by name: the Structured Streaming counterpart of a DStream job's batch interval.

:func:`with_trigger` sets a ``DataStreamWriter``'s trigger from the names the kit's settings use (``once``,
``availableNow``, a processing-time interval) and refuses continuous processing with a clear error, as the
kit's Kafka source and ``foreachBatch`` cannot run it. :mod:`modern.runner` starts every query through it;
docs/playbook.md ("Lifecycle, one by one") shows it beside the DStream batch interval.

Example::

    query = with_trigger(frame.writeStream.format("console"), "availableNow").start()
"""

from __future__ import annotations

from typing import Any

from modern.errors import ContinuousTriggerUnsupported

__all__ = ["with_trigger"]


# -- batch interval  →  triggers --------------------------------------------------------------------------

# --8<-- [start:with_trigger]
def with_trigger(writer: Any, trigger: str) -> Any:
    """``writer`` (a ``DataStreamWriter``) with the trigger named by ``trigger``.

    ``"once"`` (one micro-batch of everything available, ignoring ``maxOffsetsPerTrigger``; deprecated),
    ``"availableNow"`` (everything available at the start, in micro-batches that honour the rate limits, then
    stop), or a processing-time interval such as ``"1 second"`` (``"0 seconds"``: back to back, Spark's default).

    Raises:
        ContinuousTriggerUnsupported: ``"continuous"`` or ``"continuous:<interval>"``: the kit's Kafka source and
            ``foreachBatch`` cannot run continuous processing.
    """
    if trigger == "once":
        return writer.trigger(once=True)
    if trigger == "availableNow":
        return writer.trigger(availableNow=True)
    if trigger.split(":", 1)[0].strip().lower() == "continuous":
        raise ContinuousTriggerUnsupported(trigger, where="modern.triggers.with_trigger")
    return writer.trigger(processingTime=trigger)
# --8<-- [end:with_trigger]
