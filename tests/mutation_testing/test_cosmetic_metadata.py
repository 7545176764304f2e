"""Finding 11 of issue 30: ``cosmetic`` is limited to string constants that nothing reads back.

An event's ``metadata`` is read by computation (``privacy_cost_of_chains`` recomputes mu and eps
for K chains from ``mu_per_chain`` and ``num_chains``): the path.py mutant that passed ``None``
for friction there under-reported eps 2.4x and was filed as cosmetic. Any change under
``metadata=`` -- a number, a variable, a dropped key, the whole argument -- is a real mutant.
"""

import textwrap

import pytest

from mutation_testing.__main__ import cosmetic


def _f(body: str) -> str:
    return "def f(x, k, friction=None, label='draw'):\n" + textwrap.indent(textwrap.dedent(body), "    ")


META = 'return Event(x, label="path", metadata={"mu_per_chain": x, "num_chains": k, "friction": friction})\n'


@pytest.mark.parametrize("mut", [
    META.replace('"friction": friction', '"friction": None'),       # the path.py mutant
    META.replace('"num_chains": k', '"num_chains": 1'),            # a number under metadata=
    META.replace('"mu_per_chain": x', '"mu_per_chain": 2 * x'),    # an arithmetic change
    META.replace(', "friction": friction', ""),                      # a dropped key
    'return Event(x, label="path")\n',                               # metadata= dropped
    META.replace('"mu_per_chain"', '"XXmu_per_chainXX"'),          # a key a reader looks up
])
def test_a_change_under_metadata_is_not_cosmetic(mut):
    assert not cosmetic(_f(META), _f(mut))


def test_metadata_assembled_in_a_variable_is_not_cosmetic_either():
    orig = 'meta = {"num_chains": k}\nreturn Event(x, metadata=meta)\n'
    assert not cosmetic(_f(orig), _f(orig.replace('"num_chains": k', '"num_chains": 2')))


@pytest.mark.parametrize("orig,mut", [
    (META, META.replace('label="path"', 'label="XXpathXX"')),        # an event label (text)
    (META, META.replace('label="path", ', "")),
    ('raise ValueError(f"k = {k} is bad")\n', 'raise ValueError(f"XXk = {k} is badXX")\n'),
])
def test_text_only_changes_stay_cosmetic(orig, mut):
    assert cosmetic(_f(orig), _f(mut))
