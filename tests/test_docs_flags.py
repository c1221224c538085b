"""The docs and the argument parser agree: every command and option the docs (README.md
and docs/*.md) name exists in ``setui.cli``'s parser, and every command and option the
parser has is documented.

Where the docs name an option:

- in a ``setui ...`` command line (inline code, or a line of a fenced block): the option
  belongs to the command the line names, and must be that command's (``setui history
  show 12 --diff``); a line may also start at the command (``audit verify --against``);
- in a command line of another program (``pip install --user``, ``az ... --rule-name``):
  it is that program's, not checked;
- anywhere else (``--yes`` alone, in prose): it must be an option of some command, or
  one of the few other programs' options listed in ``FOREIGN``.

An option is documented when a command line of its command names it. The options every
command shares are those of ``setui`` itself (``setui --endpoint URL ...``): a command's
copy of one, with the same help, is documented by the shared one."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from setui.cli import build_parser
from tests.support.docs_text import Code, code, doc_files, name, prose

Command = tuple[str, ...]  # a command: () for `setui` itself, ("audit", "verify")...

# Options of other programs that the docs name on their own, outside a command line.
FOREIGN = {
    "--wait": "the example drain hook's, in a policy (docs/agent.md)",
    "--margin": "contrib/hooks' (a hook's own margin before its deadline)",
    "--cache-dir": "kubectl's",
    "--strict-markers": "pytest's, as the suite runs it (docs/testing.md)",
    "--strict-config": "pytest's, as the suite runs it (docs/testing.md)",
}

_FLAG = re.compile(r"--?[A-Za-z][\w-]*")
_WORD = re.compile(r"[a-z][a-z0-9-]*")
_SHELL_SEPARATORS = re.compile(r"\s(?:\|\|?|&&|;)\s|\$\(")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands() -> dict[Command, argparse.ArgumentParser]:
    """Every command of the parser, ``setui`` itself first."""
    found: dict[Command, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: Command) -> None:
        found[path] = parser
        for sub, child in _subcommands(parser).items():
            walk(child, (*path, sub))

    walk(build_parser(), ())
    return found


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options a user sees in ``--help`` (argparse's own --help aside)."""
    return [action for action in parser._actions
            if action.option_strings and action.help != argparse.SUPPRESS
            and not isinstance(action, argparse._HelpAction)]


def command_line(path: Command) -> str:
    return " ".join(("setui", *path))


@dataclass
class Reading:
    """What the docs say: the options each command line names, and what is wrong."""

    named: dict[Command, set[str]] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)


def _pieces(piece: Code) -> Iterator[str]:
    """The simple commands of a line of code: a pipeline, ``&&`` and ``;`` split it, and
    a shell comment ends it. ``"$(command -v setui)"`` is setui."""
    text = piece.text.replace('"$(command -v setui)"', "setui")
    if piece.block:
        text = re.split(r"(?:^|\s)#", text, maxsplit=1)[0]
    yield from _SHELL_SEPARATORS.split(text)


def _program(tokens: list[str], all_commands: dict[Command, argparse.ArgumentParser]
             ) -> tuple[str, list[str]]:
    """Whose command line this is: "setui" (the words after it, a command's name first
    when the line starts at the command), "other", or "" when it is not a command line."""
    while tokens and (tokens[0] in ("$", "sudo") or re.fullmatch(r"[A-Z_]+=\S*", tokens[0])):
        tokens = tokens[1:]
    if not tokens:
        return "", []
    first = tokens[0]
    if first == "setui" or first.endswith("/setui"):
        return "setui", tokens[1:]
    if (first,) in all_commands:
        return "setui", tokens
    if re.fullmatch(r"[\w.+/-]*[a-z][\w.+-]*", first) and not first.startswith("-"):
        return "other", tokens
    return "", tokens


def _read_line(words: list[str], where: str, reading: Reading,
               all_commands: dict[Command, argparse.ArgumentParser]) -> None:
    """A ``setui`` command line: the command its words name, and each option for that
    command (an option's value skipped); what the parser does not have is wrong."""
    path: Command = ()
    parser = all_commands[path]
    reading.named.setdefault(path, set())
    words = [w.strip("[](){}") for w in words]
    skip_value = False
    for word in words:
        if not word:
            continue
        if word.endswith(":"):  # "setui agent: metrics at ...": what setui prints
            return
        if skip_value and not word.startswith("-"):
            skip_value = False
            continue
        skip_value = False
        flag = _FLAG.fullmatch(word.split("=", 1)[0])
        if flag:
            option = flag.group(0)
            action = parser._option_string_actions.get(option)
            if action is None:
                reading.wrong.append(f"{where}: `{command_line(path)}` has no {option}")
                continue
            reading.named[path].add(option)
            skip_value = action.nargs != 0 and "=" not in word
            continue
        subcommands = _subcommands(parser)
        if subcommands and _WORD.fullmatch(word):
            if word not in subcommands:
                reading.wrong.append(f"{where}: `{command_line((*path, word))}`: no such "
                                     f"command (`{command_line(path)}` has "
                                     f"{', '.join(sorted(subcommands))})")
                return
            path = (*path, word)
            parser = subcommands[word]
            reading.named.setdefault(path, set())


def read_docs() -> Reading:
    all_commands = commands()
    everywhere = {option for parser in all_commands.values()
                  for option in parser._option_string_actions}
    reading = Reading()
    for path in doc_files():
        loose: list[tuple[int, str]] = []
        for piece in code(path):
            where = f"{name(path)}:{piece.line}"
            for simple in _pieces(piece):
                program, words = _program(simple.split(), all_commands)
                if program == "setui":
                    _read_line(words, where, reading, all_commands)
                elif program == "":
                    loose += [(piece.line, f) for f in _FLAG.findall(simple)
                              if f.startswith("--")]
        text = prose(path)
        loose += [(0, f) for f in re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", text)]
        for line, option in loose:
            if option not in everywhere and option not in FOREIGN:
                where = f"{name(path)}:{line}" if line else name(path)
                reading.wrong.append(f"{where}: {option} is no option of any setui command "
                                     "(another program's? add it to FOREIGN, saying whose)")
    return reading


def test_every_command_and_option_the_docs_name_exists() -> None:
    wrong = read_docs().wrong
    assert not wrong, "\n".join(wrong)


def test_every_command_is_documented() -> None:
    named = read_docs().named
    missing = [command_line(path) for path in commands() if path not in named]
    assert not missing, f"no command line in README.md or docs/ names {missing}"


def test_every_option_is_documented_with_its_command() -> None:
    all_commands = commands()
    named = read_docs().named
    shared = {tuple(a.option_strings): a.help for a in _options(all_commands[()])}
    missing = []
    for path, parser in all_commands.items():
        for action in _options(parser):
            if path and shared.get(tuple(action.option_strings)) == action.help:
                continue  # the shared option, documented with `setui` itself
            if not set(action.option_strings) & named.get(path, set()):
                missing.append(f"`{command_line(path)} {'/'.join(action.option_strings)}`")
    assert not missing, ("no command line in README.md or docs/ names these options with "
                         "their command:\n" + "\n".join(missing))
