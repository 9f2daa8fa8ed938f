"""A small Dockerfile reader for tests (no Docker daemon here): instructions, ARG defaults, the pip line.

Enough of the Dockerfile syntax for our own files: comments, ``\\`` line
continuations, ``ARG NAME=default`` and ``${NAME}`` substitution in FROM and RUN.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

VALUE_OPTIONS = {
    "-c",
    "--constraint",
    "-r",
    "--requirement",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
}
KNOWN = {"FROM", "ARG", "ENV", "USER", "COPY", "ADD", "RUN", "WORKDIR", "LABEL", "EXPOSE", "ENTRYPOINT", "CMD"}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    value: str
    line: int


def instructions(path: Path) -> list[Instruction]:
    """The file's instructions in order (continuations joined, comments dropped); unknown keywords raise."""
    return parse(path.read_text(), str(path))


def parse(text: str, name: str = "<text>") -> list[Instruction]:
    """The instructions of Dockerfile ``text`` (see ``instructions``)."""
    path = name
    out: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):
            continue
        if not pending:
            start = n
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        text = " ".join(p.strip() for p in pending)
        pending = []
        keyword, _, value = text.partition(" ")
        if keyword.upper() not in KNOWN or keyword != keyword.upper():
            raise ValueError(f"{path}:{start}: unknown or lower-case instruction {keyword!r}")
        out.append(Instruction(keyword, value.strip(), start))
    if pending:
        raise ValueError(f"{path}: ends inside a line continuation")
    return out


def arg_defaults(instrs: list[Instruction]) -> dict[str, str]:
    """``ARG NAME=default`` values (the first default of each name)."""
    out: dict[str, str] = {}
    for i in instrs:
        if i.keyword == "ARG" and "=" in i.value:
            name, _, default = i.value.partition("=")
            out.setdefault(name.strip(), default.strip())
    return out


def substitute(text: str, args: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in args:
            raise KeyError(f"${name} has no ARG default")
        return args[name]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", repl, text)


def base_images(path: Path) -> list[str]:
    instrs = instructions(path)
    args = arg_defaults(instrs)
    return [substitute(i.value.split()[0], args) for i in instrs if i.keyword == "FROM"]


def pip_install_requirements(path: Path) -> list[list[str]]:
    """The requirement arguments of every ``pip install`` in a RUN (options dropped), ARGs substituted."""
    instrs = instructions(path)
    args = arg_defaults(instrs)
    found = []
    for i in instrs:
        if i.keyword != "RUN":
            continue
        for command in re.split(r"&&|;", i.value):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]:
                rest = iter(words[words.index("install") + 1 :])
                reqs = []
                for w in rest:
                    if w in VALUE_OPTIONS:
                        next(rest)  # the option's value
                    elif not w.startswith("-"):
                        reqs.append(substitute(w, args))
                found.append(reqs)
    return found
