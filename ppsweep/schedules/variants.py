"""Schedule variants: ``name@option=value`` labels (docs/contract.md §5).

A sweep's ``schedule`` coordinate may name a variant, e.g. ``interleaved_1f1b@v=4`` or
``chimera@split=1:2``; several options chain with ``@`` (``hanayo@waves=2``,
``mine@a=1@b=x``); ``interleaved_1f1b@v:2`` is the same label in a form a command line takes
without quotes (:func:`canonical_label`). The label is kept as given (it is the coordinate value); the options it fixes
are parsed here and typed after the schedule's default for that option (an ``int`` default reads
``"4"`` as 4, a ``str`` default keeps ``"1:2"``; options without a default read as int, then
float, then text).
"""

from __future__ import annotations

from typing import Any


def split_label(label: str) -> tuple[str, dict[str, str]]:
    """``(name, {option: text})`` of a schedule label ``name[@option=value…]``.

    Raises:
      ValueError: naming ``schedule`` and the accepted form when an ``@`` part has no ``=``
        or an empty option name.
    """
    if not isinstance(label, str):
        raise ValueError(f"schedule: must be a name (text), got {label!r}")
    name, *parts = label.split("@")
    options: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(
                f"schedule: {label!r} is not name@option=value (e.g. interleaved_1f1b@v=4, chimera@split=1:2; "
                "on a command line without quotes: interleaved_1f1b@v:4)"
            )
        if key.strip() in options:
            raise ValueError(f"schedule: {label!r} sets option {key.strip()!r} twice")
        options[key.strip()] = value.strip()
    return name.strip(), options


def canonical_label(label: str) -> str:
    """``label`` with each ``@option:value`` written ``@option=value``.

    The colon form needs no quotes on a command line (Hydra reads ``schedules=[1f1b,interleaved_1f1b@v:2]``
    as it is, while ``=`` inside a list must be quoted: ``'schedules=[1f1b,"interleaved_1f1b@v=2"]'``);
    a store keeps the ``=`` form, so both spellings name one schedule. Parts that have an ``=``
    already (``chimera@split=1:2``) are left as they are.
    """
    if not isinstance(label, str) or "@" not in label:
        return label
    name, *parts = label.split("@")
    return "@".join([name, *(part if "=" in part else part.replace(":", "=", 1) for part in parts)])


def typed_value(label: str, option: str, text: str, default: Any) -> Any:
    """``text`` as the type of ``default`` (see the module docstring).

    Raises:
      ValueError: naming the label, the option and the expected type.
    """
    if isinstance(default, bool):
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ValueError(f"schedule: {label!r}: option {option} must be true or false, got {text!r}")
    for kind in ((int,) if isinstance(default, int) else (float,) if isinstance(default, float) else ()):
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"schedule: {label!r}: option {option} must be {kind.__name__}, got {text!r}") from None
    if default is None:
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
    return text


def variant_label(name: str, options: dict[str, Any]) -> str:
    """The label naming ``name`` with ``options`` (sorted), e.g. ``interleaved_1f1b@v=4``."""
    return name + "".join(f"@{key}={value}" for key, value in sorted(options.items()))
