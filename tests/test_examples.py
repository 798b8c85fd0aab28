"""Every example the project prints runs as printed, through the real ``precision`` entry point.

Each command's ``--help`` examples run in order (after the setup its help
page names), then the README's shell blocks and its ``$ precision`` lines,
in a scratch copy of the project (``studies/``, ``examples/``, the README)
made a git repository, as a newcomer's clone is.  The install steps
(``python3 -m pip install -e . &&``) are dropped: this suite runs inside that
install.  A ``$`` example whose shown output is an error line must exit 2;
every other must exit 0, and a shown output that is deterministic (no time
budget, no cache sizes) must match stdout line for line.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from precision.cli import _build_parser, main
from precision.operators.sigmoid_focal_loss_grad.plugins import loaded_plugins, unload_plugin

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
#: A command line without shell syntax (no pipe, list, redirection or expansion).
PLAIN = re.compile(r"precision [^|;&<>$`()]*")
INSTALL = re.compile(r"python3 -m pip install -e (\.|\"\.\[test\]\") && ")
#: What each help page says makes its examples' inputs (checked against the page, then run before them).
SETUP = {
    "diff": ["precision run examples/plugin_study.toml --out out/before/plugin_study",
             "precision run examples/plugin_study.toml --out out/after/plugin_study"],
    "score": ["python3 examples/device_dump.py out/device"],
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A scratch clone: studies/, examples/ and the README committed on main, checked out on a branch."""
    base = tmp_path_factory.mktemp("examples")
    repo = base / "repo"
    repo.mkdir()
    for name in ("studies", "examples"):
        shutil.copytree(ROOT / name, repo / name)
    shutil.copy(ROOT / "README.md", repo)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PRECISION_CACHE_DIR": str(base / "cache"), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    # a newcomer's clone on a branch of their own, main beside it (the README's diff recipe checks main out)
    for cmd in ("git init -q -b main", "git add -A", "git commit -qm scratch", "git checkout -q -b change"):
        subprocess.run(cmd.split(), cwd=repo, env=env, check=True)
    return repo, env


def shell(line: str, repo: Path, env: dict) -> subprocess.CompletedProcess:
    """One command line in bash (a pipeline fails when any part does) in the scratch clone."""
    return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300)


def help_examples(command: str) -> tuple[list[str], str]:
    """The example lines of ``precision COMMAND --help`` (comments dropped) and its text after them, unwrapped."""
    page = _build_parser().commands[command].format_help()
    block = page.split("examples:\n", 1)[1]
    lines, rest = [], []
    for line in block.splitlines():
        (lines if line.startswith("  precision ") and not rest else rest).append(line)
    return [line.split("#", 1)[0].strip() for line in lines], " ".join(" ".join(rest).split())


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """The fenced code blocks of a Markdown text: (info string, lines)."""
    blocks, info, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if info is None:
                info, body = line[3:].strip(), []
            else:
                blocks.append((info, body))
                info = None
        elif info is not None:
            body.append(line)
    return blocks


def readme_blocks() -> list[str]:
    """The README's ``sh`` blocks, install steps dropped (the test-suite block itself left out)."""
    blocks = ["\n".join(body) for info, body in fenced_blocks(README) if info == "sh"]
    return [INSTALL.sub("", b) for b in blocks if "pytest" not in b]


def readme_dollar_examples() -> list[tuple[str, list[str]]]:
    """Each ``$ precision ...`` line of the README with the output shown under it."""
    return [(body[0][2:], body[1:]) for info, body in fenced_blocks(README)
            if info == "" and body and body[0].startswith("$ precision")]


def test_every_command_has_examples_that_run(project, capsys, monkeypatch, request):
    """A plain ``precision ...`` line runs in this process (:func:`precision.cli.main`, what the console script
    calls: it saves a second of imports per line), a line with shell syntax in bash."""
    repo, env = project
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PRECISION_CACHE_DIR", env["PRECISION_CACHE_DIR"])
    order = ["oracle", "variants", "explain", "run", "gate", "report", "hunt", "diff", "score", "cache"]
    assert sorted(order) == sorted(_build_parser().commands)
    failures = []
    before = {plugin.path for plugin in loaded_plugins()}
    request.addfinalizer(lambda: [unload_plugin(plugin.path) for plugin in loaded_plugins()
                                  if plugin.path not in before])  # the in-process lines' plugins
    for command in order:
        examples, note = help_examples(command)
        assert examples, command
        for step in SETUP.get(command, []):
            assert step in note, f"{command} --help does not say how to make its inputs: {step}"
            done = shell(step, repo, env)
            assert done.returncode == 0, (step, done.stderr)
        for line in examples:
            if PLAIN.fullmatch(line):
                capsys.readouterr()
                code, err = main(shlex.split(line)[1:]), capsys.readouterr().err
            else:
                done = shell(line, repo, env)
                code, err = done.returncode, done.stderr
            if code != 0 or "Traceback" in err:
                failures.append(f"{line}: exit {code}: {err.strip()[-300:]}")
    assert failures == []


def test_readme_shell_blocks_run_as_printed(project):
    repo, env = project
    blocks = readme_blocks()
    assert len(blocks) >= 6
    for block in blocks:
        for line in re.sub(r"\\\n\s*", "", block).splitlines():  # one command line at a time, as typed
            done = shell(line, repo, env)
            assert done.returncode == 0 and "Traceback" not in done.stderr, (line, done.stdout[-500:], done.stderr)
    # the gate's two lines left what CI reads
    assert (repo / "gate.xml").is_file() and (repo / "gate_baseline.json").is_file()


@pytest.mark.parametrize("line,shown", readme_dollar_examples(), ids=lambda v: v if isinstance(v, str) else "")
def test_readme_dollar_examples(project, line, shown):
    repo, env = project
    done = shell(line, repo, env)
    error = bool(shown) and shown[0].startswith("precision: error:")
    assert done.returncode == (2 if error else 0), (line, done.stderr)
    assert "Traceback" not in done.stderr
    if error:
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("precision: error: ")
    elif shown and " hunt " in line and "--points" in line:  # reproducible points; the summary has timings
        assert done.stdout.splitlines()[:-1] == shown[:-1]
    elif shown and "--seconds" not in line and "cache" not in line:
        assert shown_in(shown, done.stdout.splitlines())


def shown_in(shown: list[str], printed: list[str]) -> bool:
    """Whether the printed lines are the shown ones, a line ``...`` standing for any run of lines."""
    chunks, chunk = [], []
    for line in shown:
        if line.strip() == "...":
            chunks.append(chunk)
            chunk = []
        else:
            chunk.append(line)
    chunks.append(chunk)
    if len(chunks) == 1:
        return printed == shown
    at = 0
    for i, part in enumerate(chunks):
        if i == 0:
            if printed[:len(part)] != part:
                return False
            at = len(part)
            continue
        if i == len(chunks) - 1 and part:
            return printed[-len(part):] == part and len(printed) - len(part) >= at
        hits = [j for j in range(at, len(printed) - len(part) + 1) if printed[j:j + len(part)] == part]
        if not hits:
            return False
        at = hits[0] + len(part)
    return True


def test_shown_in_elision():
    assert shown_in(["a", "...", "d"], ["a", "b", "c", "d"]) and not shown_in(["a", "...", "x"], ["a", "b"])
    assert shown_in(["a", "b"], ["a", "b"]) and not shown_in(["a"], ["a", "b"])
    assert shown_in(["a", "...", "c", "..."], ["a", "b", "c", "d"]) and not shown_in(["b", "..."], ["a", "b"])


def _printed_precision_lines() -> list[str]:
    """Every ``precision ...`` command line the README (its shell blocks and ``$`` examples) and the commands'
    ``--help`` examples print, one line each as typed."""
    lines = []
    for block in readme_blocks():
        lines += re.sub(r"\\\n\s*", "", block).splitlines()
    lines += [line for line, _ in readme_dollar_examples()]
    for command in _build_parser().commands:
        lines += help_examples(command)[0]
    return sorted({line.strip() for line in lines if re.match(r"\s*precision\s", line)})


def test_printed_command_lines_read_the_same_in_zsh_and_bash(tmp_path):
    """Every printed ``precision`` line hands the same arguments to the command in zsh as in bash (zsh stops
    at an unquoted ``[...]`` or ``*`` that matches no file, bash passes it on): each line runs in both with
    ``precision`` a shell function printing its arguments, NUL-separated."""
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed here (CI installs it: .ci/run)")
    lines = _printed_precision_lines()
    assert len(lines) >= 30
    stub = "precision() { printf '%s\\0' \"$@\"; }; "
    for line in lines:
        got = {sh: subprocess.run([sh, "-c", stub + line], cwd=tmp_path, capture_output=True, timeout=30)
               for sh in ("bash", "zsh")}
        piped = "|" in line  # (then the status and output are the pipe's last command's, on the stub's output)
        assert got["zsh"].returncode == got["bash"].returncode and (got["zsh"].returncode == 0 or piped), \
            (line, got["zsh"].stderr)
        assert b"no matches found" not in got["zsh"].stderr, line
        assert got["zsh"].stdout == got["bash"].stdout and (got["zsh"].stdout or piped), line
