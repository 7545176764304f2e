"""The mutation harness's own decisions (``./dev mutants``, issue 19).

A mutant classified ``cosmetic`` or ``equivalent`` is not reported as a survivor, so a classifier
that is too lenient would hide real gaps. These tests pin what may and may not be set aside, and
check ``mutation_testing/equivalent.toml`` itself (complete entries, known modules, no repeats).
"""

import textwrap
from pathlib import Path

import pytest

from mutation_testing.__main__ import cosmetic, diff_lines, load_equivalents, load_targets, match_entry


def _f(body: str) -> str:
    return "def f(x, label='draw'):\n" + textwrap.indent(textwrap.dedent(body), "    ")


@pytest.mark.parametrize("orig,mut", [
    ('if x < 0:\n    raise ValueError("x must lie in [0, inf)")\nreturn x\n',
     'if x < 0:\n    raise ValueError("XXx must lie in [0, inf)XX")\nreturn x\n'),
    ('return check_positive("beta", x)\n', 'return check_positive("BETA", x)\n'),
    ('return Event(x, label="chain")\n', 'return Event(x, label=None)\n'),
    ('return Event(x, label="chain")\n', 'return Event(x)\n'),
    ('return Event(x, assumptions="convex")\n', 'return Event(x, assumptions="XXconvexXX")\n'),
])
def test_text_that_no_computation_reads_is_cosmetic(orig, mut):
    assert cosmetic(_f(orig), _f(mut))


@pytest.mark.parametrize("orig,mut", [
    ("return 2.0 * x\n", "return 1.0 * x\n"),                                    # a sensitivity factor
    ('return Event(x, assumptions="convex")\n', "return Event(x)\n"),          # an event must state them
    ('if x == "none":\n    return 0\nreturn 1\n', 'if x == "XXnoneXX":\n    return 0\nreturn 1\n'),  # a compared string
    ('return {"kind": "gdp", "mu": x}\n', 'return {"kind": "XXgdpXX", "mu": x}\n'),  # a serialised field
    ('if x < 0:\n    raise ValueError("bad")\nreturn x\n', 'if x <= 0:\n    raise ValueError("bad")\nreturn x\n'),
])
def test_a_change_a_computation_can_read_is_not_cosmetic(orig, mut):
    assert not cosmetic(_f(orig), _f(mut))


def test_equivalents_match_module_function_and_exact_text_only():
    e = {"module": "m.py", "function": "f", "removed": "-     a = 1", "added": "+     a = 2", "reason": "why",
         "class": "equivalent", "function_sha": "0123456789abcdef"}
    assert match_entry("m.py", "f", "-     a = 1", "+     a = 2", [e], "0123456789abcdef") == ("equivalent", e)
    assert match_entry("m.py", "g", "-     a = 1", "+     a = 2", [e], "0123456789abcdef") is None
    assert match_entry("n.py", "f", "-     a = 1", "+     a = 2", [e], "0123456789abcdef") is None
    assert match_entry("m.py", "f", "-     a = 1", "+     a = 3", [e], "0123456789abcdef") is None


def test_diff_lines_names_the_changed_line_and_ignores_the_def_line():
    orig = "def f__mutmut_orig(x):\n    y = 2 * x\n    return y\n"
    mut = "def f__mutmut_7(x):\n    y = 3 * x\n    return y\n"
    assert diff_lines(orig, mut) == ("-     y = 2 * x", "+     y = 3 * x")


def test_every_equivalent_entry_is_complete_known_and_listed_once():
    modules = set(load_targets()["modules"])
    seen = set()
    for e in load_equivalents():
        assert e["module"] in modules, e
        # changed body lines carry difflib's "- " / "+ " marks; a changed signature is given bare
        # (a mutant that deletes a line, e.g. a keyword argument equal to its default, adds nothing)
        assert e["function"] and e["removed"] and (e["added"] or e["removed"].startswith("-")), e
        assert e["removed"] != e["added"], e
        assert len(e["reason"]) >= 30, e  # a reason, not a placeholder
        key = (e["module"], e["function"], e["removed"], e["added"])
        assert key not in seen, f"listed twice: {key}"
        seen.add(key)


def test_a_modules_tests_come_from_the_mirrored_layout():
    from mutation_testing.__main__ import mirrored_tests, tests_for

    # the module's own file and its aspects, not a sibling module's file that starts the same way
    assert mirrored_tests("dp_infer/privacy/ledger.py") == ["tests/privacy/test_ledger.py",
                                                             "tests/privacy/test_ledger_spend.py"]
    assert mirrored_tests("dp_infer/randomness.py") == ["tests/test_randomness.py"]
    targets = load_targets()
    assert tests_for("dp_infer/privacy/ledger.py", targets)[:2] == mirrored_tests("dp_infer/privacy/ledger.py")
    assert tests_for("m.py", {"modules": {"m.py": {"tests": ["a.py"]}}}) == ["a.py"]  # an explicit list wins
    for module in targets["order"]:
        tests = tests_for(module, targets)
        assert tests and len(tests) == len(set(tests)), module
        for t in tests:
            assert (Path(__file__).resolve().parents[2] / t).exists(), (module, t)
