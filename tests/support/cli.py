"""Run ``dp-infer ARGS`` through the console entry point in a test."""

import sys

from dp_infer import cli


def run_cli(monkeypatch, capsys, args):
    """``dp-infer ARGS`` through the console entry point: (exit code, stdout, stderr); 0 on success."""
    monkeypatch.setattr(sys, "argv", ["dp-infer", *map(str, args)])
    code = 0
    try:
        cli.run()
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err
