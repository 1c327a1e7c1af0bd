"""Where plug-ins come from: the one lookup that sources and channels share.

A plug-in is named by the `type` of its config entry and looked up in this order: the
built-in registry, then the entry-point group (a plugin package declares
`[project.entry-points."rl_digest.sources"]` or `."rl_digest.channels"`:
`name = "module:factory"`), then `module:factory` written out in the config. So a new
source or channel is a new module plus one line, here or in its own package.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from pipeline.errors import ConfigError


def load(kind: str, where: str, registry: Mapping[str, str], group: str, what: str) -> Any:
    """The factory for a plug-in `type`; `where` names the config key and `what` the kind
    of plug-in ("channel", "source") in errors."""
    target = registry.get(kind)
    if target is None:
        found = [ep for ep in entry_points(group=group) if ep.name == kind]
        if found:  # an installed package's: its module may still be gone or misnamed
            target = found[0].value
        elif ":" not in kind:
            known = sorted(set(registry) | {ep.name for ep in entry_points(group=group)})
            raise ConfigError(f"{where}: no {what} type {kind!r} (known: {', '.join(known)}; "
                              "or module:factory)")
        else:
            target = kind
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: cannot load {what} {target!r}: {exc}") from None
    except Exception as exc:  # the module's own code failed as it ran (a syntax error): the plug-in's
        raise ConfigError(f"{where}: cannot load {what} {target!r}: {type(exc).__name__}: {exc}") from None
