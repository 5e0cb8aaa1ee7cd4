"""The JSON round trip of the frozen config dataclasses that caches and run rows store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, ClassVar, Self


class DictRoundTrip:
    """``to_dict()`` and a strict ``from_dict()`` for a dataclass: an unknown key is an error
    naming ``config_name``, never silently dropped."""

    config_name: ClassVar[str] = "config"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"Unknown {cls.config_name} field(s) {unknown}; known: {', '.join(sorted(known))}."
            )
        return cls(**data)
