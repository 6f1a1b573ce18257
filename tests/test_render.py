"""Partial sums look different by how many ranks they hold (a ring's sums are seen to grow)."""

from __future__ import annotations

from collviz.app.widgets.render import PLACEHOLDER_STYLE, provenance_style, rank_style


def test_sums_of_2_3_and_4_ranks_have_distinct_styles_and_differ_from_single_ranks():
    styles = [provenance_style(list(range(k))) for k in (2, 3, 4)]
    assert len({s.bgcolor for s in styles}) == 3
    assert all(s.bgcolor != rank_style(r).bgcolor for s in styles for r in range(8))
    assert provenance_style([0, 3]) == provenance_style([1, 2])  # the count is what the shade says
    assert provenance_style([]) == PLACEHOLDER_STYLE and provenance_style([2]) == rank_style(2)
    assert provenance_style(list(range(9))) == provenance_style(list(range(64)))  # 8 and more share the lightest
