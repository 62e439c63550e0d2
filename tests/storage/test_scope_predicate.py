"""The one scope predicate (persistence.stores.scope): built once, each engine naming its
column and placeholder; what a scope refuses."""

from __future__ import annotations

import pytest

from persistence import InvalidInputError, Memory, Tier, UnsupportedOperationError
from persistence.stores.scope import WHOLE, Scope


def test_the_predicate_in_each_dialect() -> None:
    assert Scope.of("a").condition() == ("agent_id = ?", ("a",))
    assert Scope.of("a").condition("scope", "%s") == ("scope = %s", ("a",))
    assert Scope.of("a").and_("t.agent_id") == (" AND t.agent_id = ?", ("a",))
    assert Scope.of(None) == Scope.of("") == WHOLE
    assert WHOLE.condition() == ("1 = 1", ()) and WHOLE.and_() == ("", ())


def test_what_a_scope_refuses() -> None:
    theirs = Memory.create("b's", Tier.SCRATCHPAD, agent_id="b")
    with pytest.raises(InvalidInputError, match="taken in this file"):
        Scope.of("a").refuse_taken("scratchpad key 'k'", theirs)
    Scope.of("b").refuse_taken("scratchpad key 'k'", theirs)  # its own
    WHOLE.refuse_taken("scratchpad key 'k'", theirs)  # the operator's handle
    with pytest.raises(UnsupportedOperationError, match="cannot back it up"):
        Scope.of("a").refuse_file_op("back it up")
    WHOLE.refuse_file_op("back it up")
