"""The engines ``compare`` can run, by name.

Every run, measurement and report goes through :class:`kit.engine.KitEngine`, so nothing in ``compare`` asks
which engine it holds.

Example:
    >>> get_engine("legacy").batches_by_clock
    True
    >>> ENGINES
    ('legacy', 'modern')
"""

from __future__ import annotations

from kit.engine import Handover, KitEngine
from kit.errors import ConfigError
from legacy.engine import LEGACY
from modern.engine import MODERN

__all__ = ["ENGINES", "get_engine", "handover", "register_engine"]

_REGISTRY: dict[str, KitEngine] = {LEGACY.name: LEGACY, MODERN.name: MODERN}
ENGINES: tuple[str, ...] = ("legacy", "modern")
"""The engines a compare run pairs, in the order it runs them (the migration's before and after)."""


def get_engine(name: str) -> KitEngine:
    """The engine registered as ``name``.

    Raises:
        ConfigError: no engine has that name (the message lists them).
    """
    engine = _REGISTRY.get(name)
    if engine is None:
        msg = f"unknown engine {name!r}; the engines are: {', '.join(sorted(_REGISTRY))}"
        raise ConfigError(msg, field="engine", expected=tuple(sorted(_REGISTRY)), actual=name)
    return engine


def handover() -> Handover:
    """How ``dmk cutover`` reads where a job of the engine a migration leaves stopped (the first with a handover).

    Example:
        >>> handover().sources
        ('checkpoint', 'kafka', 'zookeeper', 'sqlite', 'postgresql')
    """
    found = next((engine.handover for engine in map(get_engine, ENGINES) if engine.handover is not None), None)
    if found is None:  # the registry's own engines always have one: a programming error, not bad input
        msg = f"none of the engines {ENGINES} has a handover (kit.engine.KitEngine.handover)"
        raise ConfigError(msg, field="engine", expected="an engine with a handover", actual=ENGINES)
    return found


def register_engine(engine: KitEngine) -> None:
    """Make ``engine`` available by its name (a driver process finds it there too if registered on import).

    Raises:
        ConfigError: not a :class:`~kit.engine.KitEngine`, or its name is taken by another engine.
    """
    if not isinstance(engine, KitEngine):
        msg = f"{engine!r} does not implement kit.engine.KitEngine (name, batches_by_clock, start, resolve, capped...)"
        raise ConfigError(msg, field="engine", expected="kit.engine.KitEngine", actual=type(engine).__name__)
    taken = _REGISTRY.get(engine.name)
    if taken is not None and taken is not engine:
        msg = f"an engine named {engine.name!r} is registered already ({taken!r})"
        raise ConfigError(msg, field="engine", expected="a new name", actual=engine.name)
    _REGISTRY[engine.name] = engine
