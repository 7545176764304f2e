"""Accepted mutants carry a class and expire with their function's code (issue 30, findings 10-11).

An entry of ``mutation_testing/equivalent.toml`` accepts a surviving mutant only when module,
function, the removed / added text AND ``function_sha`` (the hash of the original function's code)
all match; ``class`` is one of equivalent / unreachable / safe-side, and an unreachable entry names
its guard. A change of a function's code makes its entries stale: the mutant is then reported as a
survivor until a human re-reviews the entry. The first test runs ``--check-equivalents``' check on
the committed file, so a code change to a function with accepted mutants fails the everyday suite
in the same commit.
"""

import textwrap

import pytest

from mutation_testing import __main__ as H
from mutation_testing import equivalents as E

SRC = textwrap.dedent('''
    def f(x):
        # a comment
        a = 1
        return x + a


    class K:
        def g(self, x):
            return 2 * x
''')


def _entry(**kw):
    e = {"module": "m.py", "function": "f", "removed": "-     a = 1", "added": "+     a = 2",
         "reason": "a reason that is long enough to be one", "class": "equivalent",
         "function_sha": E.function_sha(SRC, "f")}
    e.update(kw)
    return {k: v for k, v in e.items() if v is not None}


def _shas(src=SRC):
    return lambda module, function: E.function_sha(src, function) if module == "m.py" else None


def test_the_committed_equivalents_are_classified_and_current():
    problems = E.check_equivalents(E.load_equivalents(), E.CurrentShas())
    assert problems == [], "\n".join(problems[:20])


def test_function_sha_ignores_comments_and_layout_but_not_code():
    sha = E.function_sha(SRC, "f")
    assert len(sha) == 16 and int(sha, 16) >= 0
    relaid = SRC.replace("    # a comment\n", "").replace("return x + a", "return (x +\n            a)  # same")
    assert E.function_sha(relaid, "f") == sha
    assert E.function_sha(SRC.replace("a = 1", "a = 1.0"), "f") != sha
    assert E.function_sha(SRC, "K.g") == E.function_sha(SRC.replace("2 * x", "2 * x  # c"), "K.g")
    assert E.function_sha(SRC, "K.g") != E.function_sha(SRC.replace("2 * x", "3 * x"), "K.g")
    assert E.function_sha(SRC, "h") is None and E.function_sha(SRC, "K.f") is None


def test_a_stale_hash_is_not_matched():
    e = _entry()
    assert E.match_entry("m.py", "f", e["removed"], e["added"], [e], e["function_sha"]) == ("equivalent", e)
    changed = E.function_sha(SRC.replace("return x + a", "return x - a"), "f")
    assert E.match_entry("m.py", "f", e["removed"], e["added"], [e], changed) == ("stale", e)
    unstamped = _entry(function_sha=None)
    assert E.match_entry("m.py", "f", e["removed"], e["added"], [unstamped], e["function_sha"]) == ("stale", unstamped)


@pytest.mark.parametrize("cls", ["unreachable", "safe-side"])
def test_the_class_is_reported(cls):
    e = _entry(**{"class": cls, "guard": "f is only called with x > 0"})
    assert E.match_entry("m.py", "f", e["removed"], e["added"], [e], e["function_sha"])[0] == cls


def test_class_is_required_and_must_be_known():
    for bad in (None, "", "cosmetic", "equivalent-ish"):
        e = _entry(**{"class": bad}) if bad is not None else {k: v for k, v in _entry().items() if k != "class"}
        problems = E.check_equivalents([e], _shas())
        assert len(problems) == 1 and "class must be one of" in problems[0], (bad, problems)
        assert E.match_entry("m.py", "f", e["removed"], e["added"], [e], e["function_sha"])[0] == "stale"


def test_unreachable_needs_a_guard():
    problems = E.check_equivalents([_entry(**{"class": "unreachable"})], _shas())
    assert len(problems) == 1 and "guard" in problems[0]
    assert E.check_equivalents([_entry(**{"class": "unreachable", "guard": "   "})], _shas())
    assert E.check_equivalents([_entry(**{"class": "unreachable", "guard": "check_alpha rejects alpha <= 1"})],
                               _shas()) == []


def test_check_reports_stale_unstamped_gone_and_repeated_entries():
    assert E.check_equivalents([_entry()], _shas()) == []
    changed = SRC.replace("a = 1\n", "a = 2\n")
    assert "stale" in E.check_equivalents([_entry()], _shas(changed))[0]
    assert "no function_sha" in E.check_equivalents([_entry(function_sha=None)], _shas())[0]
    assert "no longer exists" in E.check_equivalents([_entry(function="gone")], _shas())[0]
    assert "listed twice" in E.check_equivalents([_entry(), _entry()], _shas())[0]


def test_stamp_fills_only_entries_without_a_hash(tmp_path):
    sha = E.function_sha(SRC, "f")
    text = textwrap.dedent('''\
        # header

        [[mutant]]
        module = "m.py"
        function = "f"
        class = "equivalent"
        removed = "-     a = 1"
        added = "+     a = 2"
        reason = "new, reviewed, not stamped yet"

        [[mutant]]
        module = "m.py"
        function = "f"
        function_sha = "ffffffffffffffff"
        class = "equivalent"
        removed = "-     a = 1"
        added = "+     a = 3"
        reason = "stale: must be re-reviewed, never re-stamped"
        ''')
    p = tmp_path / "equivalent.toml"
    p.write_text(text)
    assert E.stamp(p, _shas()) == 1
    entries = E.load_equivalents(p)
    assert entries[0]["function_sha"] == sha
    assert entries[1]["function_sha"] == "ffffffffffffffff"
    assert p.read_text().startswith("# header") and p.read_text().count("[[mutant]]") == 2
    assert E.stamp(p, _shas()) == 0  # idempotent


def test_a_survivor_with_a_stale_entry_counts_as_a_survivor():
    orig = "def x_f__mutmut_orig(x):\n    a = 1\n    return x + a\n"
    mut = "def x_f__mutmut_1(x):\n    a = 2\n    return x + a\n"
    srcs = {"x_f__mutmut_orig": orig, "x_f__mutmut_1": mut}
    statuses = {"m.x_f__mutmut_1": "survived"}
    e = _entry()
    counts, surv, acc = H.classify("m.py", statuses, srcs, [e], _shas())
    assert counts["equivalent"] == 1 and not surv and acc[0]["class"] == "equivalent"
    counts, surv, acc = H.classify("m.py", statuses, srcs, [e], _shas(SRC.replace("x + a", "a + x")))
    assert counts["stale"] == 1 and counts["equivalent"] == 0 and surv[0]["status"] == "stale" and not acc
    counts, surv, _ = H.classify("m.py", statuses, srcs, [], _shas())
    assert counts["survived"] == 1 and surv[0]["status"] == "survived"
