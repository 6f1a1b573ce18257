"""Pipeline parallelism on real gloo ranks: each schedule run once, asserted on many times.

Expected values are computed here: the schedules' orders from their definitions (GPipe: every
forward, then every backward; 1F1B: p − s warm-up forwards on stage s, then one backward and one
forward in turn, then the remaining backwards), the bytes each message carries from the model's
shape, the losses from the whole model run on one process.
"""

from __future__ import annotations

import tomllib
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from collviz.app.cli import main
from collviz.runtime.wire.protocol import Buffer, Check, Memory, RunEnd, Span, Transfer
from collviz.runtime.wire.trace import TraceContents, read_trace

from support.app import real_session, until
from support.cli import run_cli
from support.paths import FIXTURES, SCENARIOS
from support.reference_models import reference_batch, reference_gpt
from support.scenarios import PP_REFUSAL, needs_pp


SCENARIO = SCENARIOS / "pp.toml"
RUNS = {"gpipe-4": ("gpipe", 4, 8), "1f1b-4": ("1f1b", 4, 8), "1f1b-2": ("1f1b", 2, 2)}
"""key → (schedule, stages, microbatches)."""


@pytest.fixture(scope="module")
def settings() -> dict:
    return tomllib.loads(SCENARIO.read_text())["settings"] | {"timed_steps": 3}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[TraceContents, str]]:
    """Each run recorded once: (trace, headless summary); the tests asking for them are skipped on a
    torch collviz refuses pp on, saying why."""
    if PP_REFUSAL is not None:
        pytest.skip(PP_REFUSAL)
    folder = tmp_path_factory.mktemp("pp")
    found = {}
    for key, (schedule, stages, microbatches) in RUNS.items():
        path = folder / f"{key}.cvz"
        result = run_cli("pp", "--gpus", str(stages), "--backend", "gloo", "--schedule", schedule,
                         "--microbatches", str(microbatches), "--headless", "--record", str(path), timeout=240)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        found[key] = (read_trace(path), result.stdout)
    return found


def _of(trace: TraceContents, kind: type) -> list:
    return [e for e in trace.events if isinstance(e, kind)]


def expected_order(schedule: str, stages: int, microbatches: int, stage: int) -> list[tuple[str, int]]:
    """The (kind, microbatch) sequence stage ``stage`` runs, from the schedule's definition."""
    if schedule == "gpipe":
        return [("forward", m) for m in range(microbatches)] + [("backward", m) for m in range(microbatches)]
    warmup = min(microbatches, stages - stage)
    order = [("forward", m) for m in range(warmup)]
    forwards, backwards = warmup, 0
    while backwards < microbatches:
        order.append(("backward", backwards))
        backwards += 1
        if forwards < microbatches:
            order.append(("forward", forwards))
            forwards += 1
    return order


@pytest.mark.parametrize("key", list(RUNS))
def test_every_check_passes_and_the_run_ends_ok(runs, key):
    trace, _ = runs[key]
    checks = _of(trace, Check)
    stages = RUNS[key][1]
    assert len(checks) == stages + 1  # every stage's gradients, and the last stage's loss
    assert all(c.ok for c in checks), [c.detail for c in checks if not c.ok]
    assert _of(trace, RunEnd)[0].status == "ok"


@pytest.mark.parametrize("key", list(RUNS))
def test_each_stage_runs_its_schedule_in_order(runs, key):
    trace, _ = runs[key]
    schedule, stages, microbatches = RUNS[key]
    for stage in range(stages):
        spans = sorted((s for s in _of(trace, Span) if s.rank == stage), key=lambda s: s.t_ns)
        assert [(s.kind, s.microbatch) for s in spans] == expected_order(schedule, stages, microbatches, stage)


@pytest.mark.parametrize("key", list(RUNS))
def test_data_flows_forward_then_back_through_the_stages(runs, key):
    """A microbatch's forward on stage s+1 starts after it ended on stage s; its backward on s
    starts after it ended on s+1 (one clock: all ranks run on this host)."""
    trace, _ = runs[key]
    _, stages, microbatches = RUNS[key]
    when = {(s.rank, s.kind, s.microbatch): (s.t_ns - s.duration_ns, s.t_ns) for s in _of(trace, Span)}
    for m in range(microbatches):
        for s in range(stages - 1):
            assert when[(s + 1, "forward", m)][0] >= when[(s, "forward", m)][1]
            assert when[(s, "backward", m)][0] >= when[(s + 1, "backward", m)][1]


@pytest.mark.parametrize("key", list(RUNS))
def test_every_activation_and_gradient_message_is_a_transfer_of_the_right_size(runs, key, settings):
    trace, _ = runs[key]
    _, stages, microbatches = RUNS[key]
    rows = settings["batch"] // microbatches
    message = rows * settings["seq"] * settings["d_model"] * 4  # float32 activations of one microbatch
    transfers = Counter((t.src, t.dst, t.buffer.split(" mb")[0], t.bytes, t.kind) for t in _of(trace, Transfer))
    expected = Counter()
    for s in range(stages - 1):
        expected[(s, s + 1, "activations", message, "p2p")] = microbatches
        expected[(s + 1, s, "output grad", message, "p2p")] = microbatches
    assert transfers == expected


@pytest.mark.parametrize("key", list(RUNS))
def test_microbatch_losses_equal_the_whole_model_on_each_slice(runs, key, settings):
    trace, _ = runs[key]
    _, stages, microbatches = RUNS[key]
    model = reference_gpt(settings)
    inputs, targets = reference_batch(settings, 0)
    with torch.no_grad():
        expected = [float(F.cross_entropy(model(x).reshape(-1, settings["vocab"]), y.reshape(-1)))
                    for x, y in zip(inputs.chunk(microbatches), targets.chunk(microbatches))]
    shown = next(b for b in _of(trace, Buffer) if b.name == "microbatch losses")
    assert shown.rank == stages - 1
    assert shown.values == pytest.approx(expected, rel=1e-5)


def _activation_rise(trace: TraceContents, rank: int, phase: int) -> int:
    samples = [m for m in _of(trace, Memory) if m.rank == rank and m.phase == phase]
    return max(m.by_category.get("activations", 0) for m in samples) - samples[0].by_category.get("activations", 0)


def test_1f1b_keeps_fewer_microbatches_of_activations_than_gpipe(runs):
    """On 4 stages with 8 microbatches GPipe's stages keep all 8 microbatches' activations at once
    and 1F1B's stage s at most 4 − s, so every stage's activation memory rises less under 1F1B, and
    on the two middle stages (one block each, the same shapes) the difference is the same number
    of bytes per microbatch not kept: 8 − 3 of them on stage 1, 8 − 2 on stage 2."""
    gpipe, _ = runs["gpipe-4"]
    one, _ = runs["1f1b-4"]
    phase = next(s.phase for s in _of(gpipe, Span))
    rises = [(_activation_rise(gpipe, s, phase), _activation_rise(one, s, phase)) for s in range(4)]
    assert all(g > o > 0 for g, o in rises), rises
    per_stage1 = (rises[1][0] - rises[1][1]) / (8 - 3)
    per_stage2 = (rises[2][0] - rises[2][1]) / (8 - 2)
    assert per_stage1 == pytest.approx(per_stage2, rel=0.05), rises


@pytest.mark.parametrize("key", list(RUNS))
def test_summary_prints_the_measured_bubble_beside_the_formula(runs, key):
    _, summary = runs[key]
    _, p, m = RUNS[key]
    assert f"ideal (p−1)/(m+p−1) = ({p}−1)/({m}+{p}−1) = {(p - 1) / (m + p - 1):.3f}" in summary
    assert "bubble: measured 0." in summary
    for rank in range(p):
        assert f"    r{rank} " in summary


@pytest.mark.parametrize("argv, words", [
    pytest.param(["pp", "--gpus", "8"], "8 stages need at least 8 transformer blocks", marks=needs_pp),
    pytest.param(["pp", "--microbatches", "3"], "--microbatches 3: must divide the batch of 8", marks=needs_pp),
    pytest.param(["pp", "--schedule", "1f1b", "--microbatches", "2"], "1f1b needs at least as many microbatches as stages",
                 marks=needs_pp),
    pytest.param(["pp", "--top-k", "2"], "--top-k does not apply to pp", marks=needs_pp),
    (["all-reduce", "--schedule", "gpipe"], "--schedule does not apply to all-reduce"),
])
def test_pipeline_options_that_do_not_fit_are_one_line_errors(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("collviz: error: ") and words in err and err.count("\n") == 1


def test_help_names_the_schedules_and_the_default(capsys):
    with pytest.raises(SystemExit):
        main(["pp", "--help"])
    out = capsys.readouterr().out
    assert "gpipe (all forwards, then all backwards; the default)" in " ".join(out.split())
    assert "microbatches 4" in out  # the scenario's own default, from its file


def test_unequal_stages_explain_part_of_the_bubble_and_the_rest_is_named():
    """Two stages, two microbatches; stage 0 computes 1 ms per microbatch (forward + backward),
    stage 1 3 ms. With nothing else taking time the step lasts (m−1)·3 + (1 + 3) = 7 ms while each
    stage computes 2 and 6 ms: idle 1 − (2 + 6)/2/7 = 3/7, above (p−1)/(m+p−1) = 1/3."""
    from collviz.runtime.reports.pipeline import bubble_reasons, paced_bubble, timeline_of

    ms = 1_000_000
    durations = {0: (ms // 2, ms // 2), 1: (ms, 2 * ms)}  # (forward, backward) per microbatch
    spans, clock = [], 0
    for rank, (forward, backward) in durations.items():
        for seq, (kind, took) in enumerate([("forward", forward)] * 2 + [("backward", backward)] * 2):
            clock += took + ms  # a gap between computations: the measured bubble exceeds the paced one
            spans.append(Span(run="r", rank=rank, seq=seq, t_ns=clock, phase=1, kind=kind, microbatch=seq % 2,
                              duration_ns=took))
    timeline = timeline_of(spans)
    paced, per_microbatch = paced_bubble(timeline)
    assert per_microbatch == {0: 1 * ms, 1: 3 * ms}
    assert paced == pytest.approx(3 / 7)
    reasons = bubble_reasons(timeline)
    assert "r0 1.00, r1 3.00 ms" in reasons[0] and "slowest stage (r1)" in reasons[0] and "would be 0.429" in reasons[0]
    assert f"the other {timeline.mean_bubble() - 3 / 7:.3f} went between computations" in reasons[1]


def test_the_view_carries_the_step_s_spans_and_keeps_them_after_it():
    """Before the pipelined step no spans; at it every rank's 2·m spans; at the optimizer step
    after it, still the same spans (the timeline stays on screen)."""
    from collviz.app.model.log import EventLog
    from collviz.app.model.view import view_at

    trace = read_trace(FIXTURES / "pp.cvz")
    log = EventLog(trace.events)
    spans = [e for e in trace.events if isinstance(e, Span)]
    schedule = spans[0].phase
    assert view_at(log, log.step_ends[schedule - 1]).spans == ()
    at_step = view_at(log, log.step_ends[schedule]).spans
    assert sorted(at_step, key=lambda s: s.seq + 1000 * s.rank) == sorted(spans, key=lambda s: s.seq + 1000 * s.rank)
    assert Counter(s.rank for s in at_step) == {r: 2 * 4 for r in range(4)}
    assert view_at(log, log.step_ends[schedule + 1]).spans == at_step


async def test_the_pipelined_step_is_stepped_piece_by_piece_in_the_order_the_pieces_ended():
    """→ onto the pipelined step shows its first span (by end time, whichever rank's), each →
    one more with the title naming it, then the whole step with the measured bubble; ← takes one
    back; the next → after the whole step goes on to the next step."""
    from collviz.app.app import make_app
    from collviz.app.widgets.pipeline_timeline import PipelineTimeline

    trace = read_trace(FIXTURES / "pp.cvz")
    spans = sorted((e for e in trace.events if isinstance(e, Span)), key=lambda s: s.t_ns)
    schedule = spans[0].phase
    app = make_app(trace=FIXTURES / "pp.cvz", mask_volatile=True)
    async with app.run_test(size=(160, 50)) as pilot:
        while not app.loaded:
            await pilot.pause(0.05)
        app.action_seek_to(schedule)  # the step before the pipelined one
        await pilot.press("right")
        pane = app.screen.query_one(PipelineTimeline)
        for count in range(1, len(spans)):
            view = app.current_view()
            assert view.step == schedule and view.spans == tuple(spans[:count])
            latest = spans[count - 1]
            assert str(pane.border_title).startswith(
                f"pipeline · piece {count} of {len(spans)}: r{latest.rank} {latest.kind} of microbatch {latest.microbatch}")
            await pilot.press("right")
        assert len(app.current_view().spans) == len(spans) and "bubble measured" in str(pane.border_title)
        await pilot.press("right")
        assert app.current_view().step == schedule + 1
        await pilot.press("left")  # back onto the pipelined step: whole
        assert app.current_view().step == schedule and len(app.current_view().spans) == len(spans)
        app.action_seek_to(schedule)
        await pilot.press("right", "right", "right", "left")
        assert app.current_view().spans == tuple(spans[:2])


def test_compare_theory_counts_each_parallelism_s_own_share_of_the_state():
    """The theory column for fsdp-tp and pp, from the model's shapes worked out here: d_model 64,
    4 blocks, vocab 64, seq 16 (pp.toml and fsdp-tp.toml train the same model)."""
    from collviz.runtime.compare import model_sizes
    from collviz.runtime.reports.compare import RunFigures, state_theory
    from collviz.runtime.scenario_files.loading import find_scenario

    d, vocab, seq, blocks = 64, 64, 16, 4
    block = 4 * (d * d + d) + 2 * 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
    embed, head = vocab * d + seq * d, 2 * d + d * vocab
    params = embed + blocks * block + head
    split = blocks * (d * 4 * d + 4 * d + 4 * d * d)  # fc1 weight and bias, fc2 weight
    sizes = model_sizes(find_scenario("pp"), 4)
    assert (sizes.params, sizes.unit, sizes.split) == (params, block, split)
    assert sizes.stages == (embed + block, block, block, block + head)

    def figures(kind: str, tp: int = 1) -> RunFigures:
        return RunFigures(kind, {}, [], None, "ok", {}, kind, 1, tp)

    assert state_theory(figures("pp"), 4, sizes)[0] == 16 * (embed + block)
    assert state_theory(figures("pp"), 4, sizes, rank=3)[0] == 16 * (block + head)
    assert state_theory(figures("fsdp-tp", tp=2), 4, sizes)[0] == 16 * split // 4 + 16 * (params - split) // 2
    assert state_theory(figures("ddp"), 4, sizes)[0] == 16 * params


@pytest.mark.parametrize("key", list(RUNS))
def test_every_phase_is_narrated_with_the_run_s_numbers(runs, key):
    from collviz.runtime.wire.protocol import Phase

    trace, _ = runs[key]
    _, p, m = RUNS[key]
    begins = {e.index: e for e in trace.events if isinstance(e, Phase) and e.edge == "begin"}
    assert len(begins) == 5 and all(b.narration for b in begins.values())
    schedule = next(b for b in begins.values() if b.key == "schedule")
    assert f"= {(p - 1) / (m + p - 1):.3f} for p = {p}, m = {m}" in schedule.narration


def test_the_measured_bubble_is_each_stage_s_idle_share_of_the_step():
    """Two stages over a 5 ms window: stage 0 computes 0–1 and 2–3 ms (idle 3/5), stage 1 computes
    1–2 and 3–5 ms (idle 2/5); the mean is 1/2. The ideal for p = 4, m = 4 is 3/7."""
    from collviz.runtime.reports.pipeline import ideal_bubble, timeline_of

    ms = 1_000_000
    busy = {0: [(0, 1), (2, 3)], 1: [(1, 2), (3, 5)]}
    spans = [Span(run="r", rank=rank, seq=i, t_ns=end * ms, phase=1, kind=("forward", "backward")[i], microbatch=0,
                  duration_ns=(end - start) * ms)
             for rank, pieces in busy.items() for i, (start, end) in enumerate(pieces)]
    timeline = timeline_of(spans)
    assert timeline.window_ns == 5 * ms
    assert (timeline.bubble(0), timeline.bubble(1)) == pytest.approx((3 / 5, 2 / 5))
    assert timeline.mean_bubble() == pytest.approx(1 / 2)
    assert ideal_bubble(4, 4) == pytest.approx(3 / 7) and ideal_bubble(2, 8) == pytest.approx(1 / 9)


@needs_pp
async def test_a_step_through_pp_run_lands_on_its_pipelined_step_piece_by_piece():
    """`collviz pp --step` on 4 real gloo ranks: the first gate (before the schedule) shows every
    stage's parameters; once every rank has run the schedule its frame lands at the first piece
    (one stage's forward of microbatch 0), each space shows one more recorded span, and the space
    after the whole step opens the next gate."""
    from collviz.app.app import make_app
    from collviz.app.widgets.pipeline_timeline import PipelineTimeline

    session = real_session("pp", step=True)
    app = make_app(session=session)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.current_view().state.kind == "waiting", tries=3000)
        view = app.current_view()
        assert view.state.gate == 1 and view.state.waiting == (0, 1, 2, 3) and view.step == 0
        assert all(any(b.name == f"stage {rank.rank} parameters" for b in rank.buffers) for rank in view.ranks)
        await pilot.press("space")
        await until(pilot, lambda: app.current_view().state.gate == 2, tries=3000)
        schedule = app.event_log.phases[1]
        total = schedule.spans.count_upto(len(app.event_log))
        assert total == 2 * 4 * int(app.event_log.run_start.options["microbatches"])  # F and B per stage and microbatch
        pane = app.screen.query_one(PipelineTimeline)
        for count in range(1, total):
            view = app.current_view()
            assert view.step == 1 and len(view.spans) == count and view.spans_hidden == total - count
            # the pane shows the view at its next frame, which a loaded machine may paint after a pause
            await until(pilot, lambda: str(pane.border_title).startswith(f"pipeline · piece {count} of {total}: r"))
            assert "as recorded" in str(pane.border_title)
            await pilot.press("space")
            await pilot.pause()
        await until(pilot, lambda: "bubble measured" in str(pane.border_title))
        assert app.current_view().spans_hidden == 0
        assert app.mode.released == 1
        await pilot.press("space")
        assert app.mode.released == 2
        await until(pilot, lambda: app.current_view().state.gate == 3, tries=3000)
        await pilot.press("q")
