"""`iez completion bash`: a bash completion script generated from the command's own parser, so
it always knows every subcommand and option. Generated rather than argcomplete's hook, which
re-runs iez (importing every command module) at each TAB press and needs a line in the entry
point; this script completes without running iez at all."""

from __future__ import annotations

import argparse
import shlex

SCRIPT = """\
# bash completion for iez, made by `iez completion bash` (iez {version}).
# Use: eval "$(iez completion bash)" in ~/.bashrc, or save it as
# /etc/bash_completion.d/iez (or ~/.local/share/bash-completion/completions/iez).
_iez() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} path="" words="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "$path ${{COMP_WORDS[i]}}" in
{paths}
        esac
    done
    case "$path" in
{words}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    if [[ $cur != -* ]]; then
        COMPREPLY+=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _iez iez
"""


EMPTY = '""'  # the top level's case label


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("completion", help="print a shell completion script for iez",
                       description="Print a bash completion script: eval \"$(iez completion bash)\" in ~/.bashrc, "
                                   "or save it as /etc/bash_completion.d/iez.")
    p.add_argument("shell", choices=("bash",))
    p.set_defaults(func=cmd_completion)


def command_words(parser: argparse.ArgumentParser, path: str = "") -> dict[str, list[str]]:
    """For each subcommand path (" trace import"), the words that may follow it: its
    subcommands and its options."""
    words: list[str] = []
    out: dict[str, list[str]] = {path: words}
    for action in parser._actions:
        words.extend(o for o in action.option_strings if o.startswith("-"))
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words.append(name)
                out.update(command_words(sub, f"{path} {name}"))
    return out


def bash_script(parser: argparse.ArgumentParser) -> str:
    from iez import __version__

    tree = command_words(parser)
    subpaths = [p for p in tree if p]
    paths = "\n".join(f"            {shlex.quote(p)}) path={shlex.quote(p)} ;;" for p in subpaths)
    words = "\n".join(f"        {shlex.quote(p) if p else EMPTY}) words={shlex.quote(' '.join(w))} ;;"
                      for p, w in tree.items())
    return SCRIPT.format(version=__version__, paths=paths, words=words)


def cmd_completion(args: argparse.Namespace) -> int:
    from iez.cli import build_parser

    print(bash_script(build_parser()), end="")
    return 0
