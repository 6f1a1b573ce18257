"""Partial sums look different by how many ranks they hold (a ring's sums are seen to grow)."""

from __future__ import annotations

from collviz.app.widgets.render import PLACEHOLDER_STYLE, buffer_lines, format_values, provenance_style, rank_style
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


def test_a_cut_grid_keeps_its_full_lines_and_says_how_many_values_are_left_on_the_last():
    """A 16×64 matrix in a narrow panel: every line but the last holds as many cells as the width
    takes (the "…+N" note is not reserved on each of them), and N counts the values not shown."""
    values = [float(i) for i in range(1024)]  # labels "0" … "1023": 4 characters, cells of 5
    buffer = Buffer(run="r", rank=0, seq=0, t_ns=0, phase=0, name="m", role="x", moment="after", shape=[16, 64],
                    dtype="float32", values=values, provenance=None)
    lines = ["".join(segment.text for segment in line) for line in buffer_lines(buffer, 27, max_rows=8)[1:]]
    per_line = (27 - 1) // 5
    assert len(lines) == 8
    assert [line.split() for line in lines[:-1]] == [
        [str(i) for i in range(start, start + per_line)] for start in range(0, 7 * per_line, per_line)]
    *cells, note = lines[-1].split()
    shown = 7 * per_line + len(cells)
    assert cells == [str(i) for i in range(7 * per_line, shown)] and note == f"…+{1024 - shown}"
    assert len(lines[-1]) <= 27


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


def _oklab_via_xyz(colour: str) -> tuple[float, float, float]:
    """OKLab by way of CIE XYZ (D65): the sRGB → XYZ matrix of IEC 61966-2-1 and Ottosson's
    XYZ → LMS and LMS → Lab matrices, a route the code under test does not take."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = 0.0193339 * r + 0.1191920 * g + 0.9503041 * b
    lms = [0.8189330101 * x + 0.3618667424 * y - 0.1288597137 * z,
           0.0329845436 * x + 0.9293118715 * y + 0.0361456387 * z,
           0.0482003018 * x + 0.2643662691 * y + 0.6338517070 * z]
    l_, m_, s_ = (v ** (1 / 3) for v in lms)
    return (0.2104542553 * l_ + 0.7936177850 * m_ - 0.0040720468 * s_,
            1.9779984951 * l_ - 2.4285922050 * m_ + 0.4505937099 * s_,
            0.0259040371 * l_ + 0.7827717662 * m_ - 0.8086757660 * s_)


def _closest(colours: list[str]) -> float:
    points = [_oklab_via_xyz(c) for c in colours]
    return min(sum((a - b) ** 2 for a, b in zip(p, q)) ** 0.5 for i, p in enumerate(points) for q in points[i + 1:])


def test_colours_beyond_eight_ranks_stay_apart_at_16_and_64_ranks():
    """Ranks 8 and up used hues a golden angle apart: at 64 ranks two were 0.008 apart in OKLab
    (indistinguishable; about 0.02 is just noticeable). Each added colour now keeps its distance
    from every earlier one, in both themes."""
    from collviz.app.widgets.render import HIGH_CONTRAST_COLOURS, RANK_COLOURS, extended_palette

    for base in (RANK_COLOURS, HIGH_CONTRAST_COLOURS):
        colours = list(extended_palette(base))
        assert colours[:8] == list(base) and len(colours) == len(set(colours)) == 64
        added = colours[8:]
        # every pair with at least one added colour (the first eight are the theme's own palette)
        closest16 = min(_closest([a, b]) for i, a in enumerate(colours[:16]) for b in colours[i + 1:16]
                        if i >= 8 or colours.index(b) >= 8)
        closest64 = min(_closest([a, b]) for i, a in enumerate(colours) for b in colours[i + 1:]
                        if i >= 8 or colours.index(b) >= 8)
        assert closest16 >= 0.12, closest16
        assert closest64 >= 0.06, closest64
        assert all(_oklab_via_xyz(c)[0] >= 0.59 for c in added), "black digits stay readable"
        greys = ["#6e6e6e", "#858585", "#9c9c9c", "#b3b3b3", "#cacaca", "#e0e0e0", "#f5f5f5"]
        assert min(_closest([c, g]) for c in added for g in greys) >= 0.05, "reduced sums are grey"


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


def test_a_float_result_keeps_its_point_where_it_could_be_read_as_an_integer():
    assert format_values([1.0]) == ["1.0"]  # reduce-scatter's part A: alone, a float stays a float
    assert format_values([1.0, 1.4]) == ["1.0", "1.4"]
    assert format_values([0.0, 1.0, 10.0, 11.0]) == ["0", "1", "10", "11"]  # a worked example's small integers
    assert format_values([3, 4]) == ["3", "4"]
    assert format_values([0.123456, 2e7]) == ["0.123", "2e+07"]


def test_a_buffer_title_names_its_role_once():
    shard = Buffer(run="r", rank=0, seq=0, t_ns=0, phase=0, name="block 0 W_query shard", role="shard",
                   moment="before", shape=[2], dtype="float32", values=[1.0, 2.0], provenance=[])
    title = "".join(segment.text for segment in buffer_lines(shard, 80, detail=True)[0])
    assert title.startswith("block 0 W_query shard [2] float32")
    gathered = Buffer(run="r", rank=0, seq=0, t_ns=0, phase=0, name="output", role="gathered",
                      moment="after", shape=[2], dtype="float32", values=[1.0, 2.0], provenance=[])
    assert "".join(segment.text for segment in buffer_lines(gathered, 80, detail=True)[0]).startswith("output (gathered)")


def test_a_narrow_panel_shortens_a_title_keeping_what_the_buffer_is():
    from rich.segment import Segment

    from collviz.app.widgets.rank_panel import fitted_title

    title = [Segment("block 0 W_query shard"), Segment(" [4×16] "), Segment("before"), Segment(" · step 1")]

    def text(width):
        return "".join(segment.text for segment in fitted_title(title, width))

    assert text(44) == "block 0 W_query shard [4×16] before · step 1"  # 44 columns: all of it
    assert text(40) == "block 0 W_query shard [4×16] before"  # the step note goes first
    assert text(30) == "block 0 W_query shard before"  # then the shape (the grid shows it)
    assert text(22) == "…W_query shard before"  # then the name's first words
    assert text(12) == "…shard"  # then the moment

    averaged = [Segment("block 0 W_query grad (averaged)"), Segment(" [4×16] "), Segment("after")]
    assert "".join(segment.text for segment in fitted_title(averaged, 27)) == "…grad (averaged) after"


def test_a_summarised_buffer_s_picture_is_coloured_by_whose_data_each_part_is():
    """FSDP's gathered 32×32 weight, too large to ship: 1,024 elements, a quarter from each rank,
    pictured by 32 chunk means. In 8 columns each column is 4 chunks (128 elements); its colour is
    that of its first chunk's middle element (column c: element 128c + 16, rank (128c + 16) // 256)."""
    from collviz.app.widgets.render import picture_segments, rank_colour
    from rich.color import Color

    from collviz.runtime.wire.protocol import BufferSummary, ProvenanceRun

    summary = BufferSummary(min=-1.0, max=1.0, mean=0.0, crc32="1", picture=[(-1) ** i * 0.5 for i in range(32)])
    gathered = Buffer(run="r", rank=0, seq=0, t_ns=0, phase=1, name="W (gathered)", role="gathered", moment="after",
                      shape=[32, 32], dtype="float32", values=None, summary=summary,
                      provenance=[ProvenanceRun(256 * r, 256, [r]) for r in range(4)])
    colours = [segment.style.color.name for segment in picture_segments(gathered, 8) for _ in segment.text]
    assert colours == [Color.parse(rank_colour(r)).name for r in (0, 0, 1, 1, 2, 2, 3, 3)]
    unobserved = Buffer(run="r", rank=0, seq=0, t_ns=0, phase=1, name="W", role="param", moment="after",
                        shape=[32, 32], dtype="float32", values=None, summary=summary, provenance=None)
    assert [segment.style.color.name for segment in picture_segments(unobserved, 8)] == ["cyan"]


def _rank_view(buffers: list[Buffer]):
    """Rank 0's view after one all_reduce of 48 KiB that took 14.23 ms (holding ``buffers``)."""
    from collviz.app.model import EventLog, view_at
    from collviz.runtime.wire.protocol import Collective, Phase, RankStart, RunStart

    call = dict(run="r", rank=0, phase=0, op="all_reduce", group="world", group_ranks=[0], group_seq=0,
                dtype="float32", count=12288, bytes_in=49152, bytes_out=49152, algo_bytes=49152, reduce_op="sum")
    events = [RunStart(run="r", rank=-1, seq=0, t_ns=0, scenario="s", world_size=1, backend="gloo", device_kind="cpu",
                       backend_reason="", mode="live"),
              RankStart(run="r", rank=0, seq=0, t_ns=1, device="cpu", backend="gloo", host="h", pid=1),
              Phase(run="r", rank=0, seq=1, t_ns=2, index=0, name="step", edge="begin"),
              *[_replace_buffer(b, seq=2 + i) for i, b in enumerate(buffers)],
              Collective(seq=2 + len(buffers), t_ns=3, edge="begin", **call),
              Collective(seq=3 + len(buffers), t_ns=4, edge="end", duration_ns=14_230_000, **call)]
    log = EventLog(events)
    [rank] = view_at(log, len(log)).ranks
    return rank


def _panel_text(buffers: list[Buffer], width: int) -> list[str]:
    """The text lines of rank 0's panel (see :func:`_rank_view`) ``width`` columns wide."""
    from collviz.app.widgets.rank_panel import rank_lines

    return ["".join(segment.text for segment in line) for line in rank_lines(_rank_view(buffers), width, status=False)]


def _replace_buffer(buffer: Buffer, seq: int) -> Buffer:
    """``buffer`` as rank 0's event number ``seq`` in phase 0."""
    import msgspec

    return msgspec.structs.replace(buffer, seq=seq, rank=0, phase=0)


def test_a_narrow_panel_gives_the_call_s_figures_lines_of_their_own():
    """27 columns (a panel at 100×30): 'all_reduce (sum) 48.0 KiB→48.0 KiB 14.23 ms' is 43, so its
    bytes and time go on the next line, whole; at 20 the time goes on a third. A panel with
    buffers keeps them too (issue 43: at 100×30 a call's bytes and time stay)."""
    assert _panel_text([], 27) == ["all_reduce (sum)", "48.0 KiB→48.0 KiB 14.23 ms"]
    assert _panel_text([], 20) == ["all_reduce (sum)", "48.0 KiB→48.0 KiB", "14.23 ms"]
    assert _panel_text([], 60) == ["all_reduce (sum) 48.0 KiB→48.0 KiB 14.23 ms"]
    buffer = Buffer(run="r", rank=0, seq=0, t_ns=2, phase=0, name="x", role="x", moment="after", shape=[4],
                    dtype="float32", values=[1.0, 2.0, 3.0, 4.0], provenance=None)
    assert _panel_text([buffer], 27)[-2:] == ["all_reduce (sum)", "48.0 KiB→48.0 KiB 14.23 ms"]


def test_a_heatmap_row_without_the_shown_buffer_gives_the_rank_s_call():
    """A script's run or an imported artifact has no buffers: each row says its call, cut whole."""
    from collviz.app.widgets.rank_heatmap import RankHeatmap

    def row(width: int) -> str:
        return "".join(segment.text for segment in RankHeatmap._row(_rank_view([]), None, 4, width)[0])

    assert row(60) == "r0  ● all_reduce (sum) 48.0 KiB→48.0 KiB 14.23 ms"
    assert row(40) == "r0  ● all_reduce 48.0 KiB→48.0 KiB"  # 34 columns after the label and mark
    assert row(13) == "r0  ● all_re…"  # 7 columns: the op itself is cut, and says so, not the columns beside


def test_nvml_figures_of_ranks_sharing_a_gpu_say_they_are_the_whole_gpus():
    from collviz.app.model.view import MemoryTrack
    from collviz.app.widgets.memory_timeline import device_figures, ranks_sharing
    from collviz.runtime.wire.protocol import CudaMemory, NvmlMemory

    gib = 1024**3
    track = MemoryTrack(live=[], phases=[], categories=[], peaks=[], length=0, upto=0, current=0, peak=0, top=0,
                        cuda=CudaMemory(allocated=gib, reserved=2 * gib, max_allocated=gib),
                        nvml=NvmlMemory(used=10 * gib, total=80 * gib, utilization_pct=None))
    assert device_figures(track) == " · CUDA 1.0 GiB/2.0 GiB · NVML 10.0 GiB/80.0 GiB"
    assert device_figures(track, 4) == " · CUDA 1.0 GiB/2.0 GiB · NVML whole GPU, 4 ranks: 10.0 GiB/80.0 GiB"
    shared = ("cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0")  # by rank
    assert [ranks_sharing(shared, r) for r in range(5)] == [3, 2, 3, 2, 3]
    assert ranks_sharing(("cpu",) * 4, 2) == 1



def test_the_legend_s_last_shade_names_the_counts_drawn_in_it():
    """Sums of 8 or more ranks share the lightest shade: its one swatch names the counts drawn in
    it (Σ8–16 where sums of 8 and of 16 ranks are drawn, Σ16 where only 16's are); each smaller
    count drawn has its own swatch, and a count not drawn has none."""
    from collviz.app.widgets.legend import legend_text
    from collviz.app.widgets.render import DrawnColours

    def swatches(*counts: int) -> list[str]:
        drawn = DrawnColours(sums=frozenset(counts))
        return [word.strip("\u00a0") for word in legend_text(drawn, labelled_rows=True).plain.split() if "Σ" in word]

    assert swatches(*range(2, 17)) == ["Σ2", "Σ3", "Σ4", "Σ5", "Σ6", "Σ7", "Σ8–16"]
    assert swatches(16) == ["Σ16"] and swatches(3, 8) == ["Σ3", "Σ8"] and swatches(2, 4) == ["Σ2", "Σ4"]
    assert swatches() == [] and legend_text(DrawnColours()).plain == ""


def test_a_summary_line_keeps_whole_figures_and_says_what_it_left_out():
    """A narrow panel drops the checksum (then the mean…) whole, with an ellipsis, rather than
    cutting 'crc deadbeef' to 'crc dea'."""
    from collviz.app.widgets.render import summary_text
    from collviz.runtime.wire.protocol import BufferSummary

    summary = BufferSummary(min=-1.0, max=2.0, mean=0.5, crc32="deadbeef", picture=[0.0])
    whole = "  min -1 max 2 mean 0.5 crc deadbeef"
    assert summary_text(summary, 80) == summary_text(summary, len(whole)) == whole
    assert summary_text(summary, len(whole) - 1) == "  min -1 max 2 mean 0.5 …"
    assert summary_text(summary, 12) == "  min -1 …"
    assert summary_text(summary, 5) == "  …"


def test_run_text_is_cut_by_terminal_cells_not_characters():
    """An emoji takes two cells: a failed rank's error with emoji, cut to a heatmap row, fills its
    room exactly and says it was cut, so the columns beside it stay in line (cut by characters,
    it ran past its room)."""
    from rich.cells import cell_len

    from collviz.app.widgets.rank_heatmap import RankHeatmap
    from collviz.app.widgets.render import fit_cells
    from collviz.app.model import MemoryTrack, RankView

    error = "failed: 🚨 gloo timed out ⏳ waiting for rank 2 ❌ after 3000 ms"
    assert fit_cells("plain", 5) == "plain" and fit_cells("🚨🚨🚨", 4) == "🚨 …"  # a half emoji is a space
    assert cell_len(fit_cells(error, 20)) == 20 and fit_cells(error, 20).endswith("…")
    rank = RankView(rank=3, device="cpu", backend="gloo", state="error", status=error, phase=1, buffers=(),
                    collective=None, memory=MemoryTrack((), (), (), (), 0, 0, 0, 0, 0))
    row = RankHeatmap._row(rank, None, 4, 30)[0]
    assert sum(cell_len(segment.text) for segment in row) == 30


def test_a_cut_text_keeps_whole_words_and_no_number_or_operator_last():
    """Phase names cut to fit: whole words, then "…"; never a number without what follows it (its
    unit, what it counts) nor an operator or separator last; all of it where it fits or the room
    is unknown (0)."""
    from collviz.app.widgets.render import fit_words

    assert fit_words("AdamW on stage 3's own parameters (211.8 KiB)", 40) == "AdamW on stage 3's own parameters…"
    assert fit_words("GPipe: 4 microbatches through 4 stages", 33) == "GPipe: 4 microbatches through…"
    assert fit_words("fc1 column-parallel: h = x · W1 shardᵀ + b1", 40) == "fc1 column-parallel: h = x · W1 shardᵀ…"
    assert fit_words("hop 2/6: reduce-scatter step 2", 30) == "hop 2/6: reduce-scatter step 2"
    assert fit_words("hop 2/6: reduce-scatter step 2", 0) == "hop 2/6: reduce-scatter step 2"
    assert fit_words("reduce-scatter", 5) == ""


def test_a_line_becomes_the_strip_textuals_own_chain_makes():
    """``line_to_strip`` styles and pads a line in one pass: the strip it gives equals the one
    Textual's ``crop → adjust_cell_length → apply_style`` chain gives, for lines shorter than the
    width, exactly as wide, longer (cut), with wide characters, unstyled and control segments,
    and over a null base style."""
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip

    from collviz.app.widgets.render import line_to_strip

    red, bold = Style(color="red"), Style(bold=True)
    lines = [
        [Segment("r12 ", red), Segment("● ", None), Segment("   ", bold), Segment("3.5", None)],  # 12 cells
        [Segment("ab", red), Segment("", None, ((1,),)), Segment("cd", None)],  # a control segment
        [Segment("宽字", bold), Segment("x", None)],  # wide characters: 5 cells
        [],
    ]
    for base in (Style(bgcolor="blue"), Style(color="white", bgcolor="black"), Style()):
        for line in lines:
            for width in (0, 3, 5, 12, 20):
                chained = Strip(line).crop(0, width).adjust_cell_length(width).apply_style(base)
                made = line_to_strip(line, width, base)
                assert list(made) == list(chained), (line, width, base)
                assert made.cell_length == chained.cell_length == width


def test_the_colours_drawn_are_read_from_the_segments_styles():
    """Rank colours, Σ shades and the placeholder each count once however many segments draw them;
    a label in a rank's colour and an unstyled segment draw no provenance colour."""
    from rich.segment import Segment

    from collviz.app.widgets.render import (PLACEHOLDER_STYLE, DrawnColours, colours_drawn, rank_label_style,
                                            rank_style, reduced_style)

    lines = [[Segment("r3 ", rank_label_style(3)), Segment("  ", rank_style(3)), Segment("  ", rank_style(12))],
             (Segment("  ", reduced_style(3)), Segment("  ", rank_style(3)), Segment(" ")),
             [Segment("  ", PLACEHOLDER_STYLE), Segment("  ", reduced_style(9))]]
    assert colours_drawn(lines) == DrawnColours(ranks=frozenset({3, 12}), sums=frozenset({3, 9}), placeholder=True)
    assert colours_drawn(lines[:1]) == DrawnColours(ranks=frozenset({3, 12}))
    assert colours_drawn([[Segment("r3 ", rank_label_style(3))], []]) == DrawnColours()


def test_the_cells_of_texts_are_rich_s_cell_lengths_summed():
    """``cells_of`` counts a character a cell only where every text is printable ASCII; anything
    else (wide, combining, control, an emoji, the pause glyph) as Rich's ``cell_len`` does. The
    expected widths are by hand: a CJK character takes two cells, a combining mark and a control
    code none."""
    from rich.cells import cell_len

    from collviz.app.widgets.render import cells_of

    cases = {("r12 ", "● ", "30.5"): 10, ("", ""): 0, ("abc", " ~"): 5, ("世界",): 4, ("e\u0301",): 1,
             ("a", "\x1b"): 1, ("tab\t",): 3, ("⏸ paused",): 8, ("é", "x"): 2}
    for texts, cells in cases.items():
        assert cells_of(list(texts)) == cells == sum(map(cell_len, texts)), texts
