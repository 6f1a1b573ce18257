"""Partial sums look different by how many ranks they hold (a ring's sums are seen to grow)."""

from __future__ import annotations

from collviz.app.widgets.render import PLACEHOLDER_STYLE, buffer_lines, provenance_style, rank_style
from collviz.runtime.wire.protocol import Buffer


def test_sums_of_2_3_and_4_ranks_have_distinct_styles_and_differ_from_single_ranks():
    styles = [provenance_style(list(range(k))) for k in (2, 3, 4)]
    assert len({s.bgcolor for s in styles}) == 3
    assert all(s.bgcolor != rank_style(r).bgcolor for s in styles for r in range(8))
    assert provenance_style([0, 3]) == provenance_style([1, 2])  # the count is what the shade says
    assert provenance_style([]) == PLACEHOLDER_STYLE and provenance_style([2]) == rank_style(2)
    assert provenance_style(list(range(9))) == provenance_style(list(range(64)))  # 8 and more share the lightest


def test_the_detail_width_keeps_each_matrix_row_on_one_line():
    """A 2×64 matrix in the rank detail: two lines of 64 cells, not 64-wide rows wrapped."""
    from collviz.app.screens.rank_detail import _row_width

    values = [float(i) for i in range(128)]
    buffer = Buffer(run="r", rank=0, seq=0, t_ns=0, phase=0, name="m", role="x", moment="after", shape=[2, 64],
                    dtype="float32", values=values, provenance=None)
    lines = buffer_lines(buffer, _row_width(buffer), detail=True)
    rows = ["".join(segment.text for segment in line).split() for line in lines[1:]]
    assert rows == [[str(i) for i in range(64)], [str(i) for i in range(64, 128)]]


def test_a_memory_column_is_as_tall_as_its_bytes_even_where_categories_share_a_cell():
    """Full height 1000 B in 8 eighths per text row; heights worked out here by hand."""
    from collviz.app.widgets.memory_chart import category_colour, stacked_cells

    # 600 of 1000 B in one row: 4.8 → 5 eighths (params 3.2 → 3, grads 2): ▅ in params' colour, no
    # colour behind it (a background would draw the cell full height)
    (cell,) = stacked_cells({"params": 400, "grads": 200}, 1000, 1, dim=False)
    assert cell[0] == "▅" and cell[1].color.name == category_colour("params") and cell[1].bgcolor is None
    # a full cell: params' half as the glyph, grads behind it
    (cell,) = stacked_cells({"params": 500, "grads": 500}, 1000, 1, dim=False)
    assert cell[0] == "▄" and cell[1].color.name == category_colour("params")
    assert cell[1].bgcolor.name == category_colour("grads")
    # two rows, 1500 of 2000 B: 12 of 16 eighths, params filling the lower row, grads half the upper
    lower, upper = stacked_cells({"params": 1000, "grads": 500}, 2000, 2, dim=False)
    assert lower[0] == "█" and lower[1].color.name == category_colour("params")
    assert upper[0] == "▄" and upper[1].color.name == category_colour("grads") and upper[1].bgcolor is None


def test_heatmap_cells_follow_the_provenance_and_the_palette_they_are_memoised_on():
    from collviz.app.widgets.rank_heatmap import heatmap_cells
    from collviz.app.widgets.render import HIGH_CONTRAST_COLOURS, RANK_COLOURS, use_palette
    from collviz.runtime.wire.protocol import ProvenanceRun

    def buffer(runs):
        return Buffer(run="r", rank=0, seq=0, t_ns=0, phase=0, name="b", role="x", moment="after", shape=[4],
                      dtype="float32", values=[0.0] * 4, provenance=runs)

    halves = buffer([ProvenanceRun(0, 2, [0]), ProvenanceRun(2, 2, [1])])
    cells = heatmap_cells(halves, 8)  # two cells per element
    assert [(s.text, s.style.bgcolor.name) for s in cells] == [("    ", RANK_COLOURS[0]), ("    ", RANK_COLOURS[1])]
    assert heatmap_cells(buffer([ProvenanceRun(0, 2, [0]), ProvenanceRun(2, 2, [1])]), 8) == cells  # same provenance
    swapped = heatmap_cells(buffer([ProvenanceRun(0, 2, [1]), ProvenanceRun(2, 2, [0])]), 8)
    assert [s.style.bgcolor.name for s in swapped] == [RANK_COLOURS[1], RANK_COLOURS[0]]
    use_palette(HIGH_CONTRAST_COLOURS)
    try:
        assert [s.style.bgcolor.name for s in heatmap_cells(halves, 8)] == list(HIGH_CONTRAST_COLOURS[:2])
    finally:
        use_palette(RANK_COLOURS)
