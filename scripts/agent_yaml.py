"""Write conf/agent/<name>.yaml from an agent's Config dataclass (fields, defaults, comments).

    python scripts/agent_yaml.py ppo a2c

The YAML is what users edit; tests/test_config.py checks it stays in step with Config.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path

from rlsweep.agents import load_agent_module


def field_comments(cls: type) -> dict[str, list[str]]:
    """The ``#`` comment lines right above each field, along the class hierarchy."""
    out: dict[str, list[str]] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        pending: list[str] = []
        for line in inspect.getsource(klass).splitlines():
            stripped = line.strip()
            if stripped.startswith("#"):
                pending.append(stripped)
            elif ":" in stripped and not stripped.startswith(("def ", '"', "class ")):
                name = stripped.split(":")[0].strip()
                if pending:
                    out[name] = pending
                pending = []
            else:
                pending = []
    return out


def render(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def agent_yaml(name: str) -> str:
    module = load_agent_module(name)
    cls = module.Config
    comments = field_comments(cls)
    doc = (cls.__doc__ or "").strip().splitlines()[0]
    lines = [f"# {doc}", f"# Supports {' and '.join(sorted(module.ACTION_SPACES))} actions.", ""]
    default = cls()
    for f in dataclasses.fields(cls):
        lines += comments.get(f.name, [])
        lines.append(f"{f.name}: {render(getattr(default, f.name))}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    conf = Path(__file__).resolve().parents[1] / "conf" / "agent"
    for agent in sys.argv[1:]:
        (conf / f"{agent}.yaml").write_text(agent_yaml(agent))
        print(f"wrote {conf / (agent + '.yaml')}")
