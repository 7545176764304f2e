"""Run ``dp-infer ARGS`` through the console entry point in a test."""

import sys

import pytest

from dp_infer import cli


def run_cli(monkeypatch, capsys, args, *, expect_exit: bool = False):
    """``dp-infer ARGS`` through the console entry point: (exit code, stdout, stderr); 0 when the
    command returns or exits with no code. ``expect_exit``: the command must end in ``SystemExit``
    (every error does; a success returns)."""
    monkeypatch.setattr(sys, "argv", ["dp-infer", *map(str, args)])
    if expect_exit:
        with pytest.raises(SystemExit) as exc:
            cli.run()
        code = exc.value.code
    else:
        try:
            cli.run()
            code = 0
        except SystemExit as e:
            code = e.code
    out = capsys.readouterr()
    return (0 if code is None else code), out.out, out.err
