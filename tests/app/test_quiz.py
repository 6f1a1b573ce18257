"""Quiz questions come from a recorded run's events; predictions are graded element by element."""

from __future__ import annotations


from collviz.app.model.log import EventLog
from collviz.app.model.quiz import QuizRound, Score, grade, questions
from collviz.runtime.wire.protocol import Buffer
from collviz.runtime.wire.trace import read_trace

from support.paths import FIXTURES


def _shards(events, name: str) -> dict[int, list[float]]:
    return {e.rank: list(e.values) for e in events if isinstance(e, Buffer) and e.name == name and e.phase == 0}


def test_the_all_gather_question_is_rank_0s_gathered_buffer():
    events = read_trace(FIXTURES / "all-gather.cvz").events
    [question] = questions(EventLog(events), rank=0)
    shards = _shards(events, "W_query_shard")
    expected = [v for rank in sorted(shards) for v in shards[rank]]  # all-gather stacks shards in rank order
    assert question.op == "all_gather" and question.step == 1 and question.shape == (4, 4)
    assert question.values == tuple(expected)
    assert question.provenance == tuple(frozenset({i // 4}) for i in range(16))


def test_a_round_asks_each_step_once_and_is_over_when_all_were_asked():
    events = read_trace(FIXTURES / "all-gather.cvz").events
    quizzes = QuizRound()
    assert quizzes.ask(EventLog(events), 0) is None and not quizzes.over(EventLog(events))  # setup ran no collective
    question = quizzes.ask(EventLog(events), 1)
    assert question is not None and question.step == 1 and question.op == "all_gather"
    assert quizzes.ask(EventLog(events), 1) is None  # asked once only
    assert quizzes.over(EventLog(events))

def test_values_are_graded_to_the_precision_shown():
    events = read_trace(FIXTURES / "all-gather.cvz").events
    [question] = questions(EventLog(events), rank=2)
    right = ", ".join(f"{v:.3g}" for v in question.values)
    assert grade(question, right).all_right
    wrong = right.replace("0.5", "0.55", 1)
    marks = grade(question, wrong).right
    assert marks.count(False) == 1 and marks.index(False) == 4
    short = grade(question, "0.1 0.2")
    assert short.right[:2] == (True, True) and not any(short.right[2:])


def test_a_prediction_one_percent_off_is_wrong():
    """Three significant digits leave at most half a unit in the third digit (0.5 %) between a
    shown value and the true one; a 1 % error, or one in the third digit of a small value, is wrong."""
    events = read_trace(FIXTURES / "all-gather.cvz").events
    [question] = questions(EventLog(events), rank=0)
    values = list(question.values)  # 0.1 to 1.6
    first, last = 0, len(values) - 1
    off = [f"{v:.6g}" for v in values]
    off[first] = f"{values[first] * 1.01:.6g}"  # 1 % high
    off[last] = f"{values[last] * 0.99:.6g}"  # 1 % low
    marks = grade(question, " ".join(off)).right
    assert [i for i, right in enumerate(marks) if not right] == [first, last]
    shown = [f"{v:.3g}" for v in values]  # what the screen shows, each within 0.5 % of the truth
    assert grade(question, " ".join(shown)).all_right


def test_who_predictions_are_rank_sets_per_element():
    events = read_trace(FIXTURES / "all-gather.cvz").events
    [question] = questions(EventLog(events), rank=1)
    answer = "who: " + ", ".join(f"r{i // 4}" for i in range(16))
    assert grade(question, answer).all_right
    assert not grade(question, "who: 0+1").all_right


def test_a_reduce_scatter_question_and_the_score():
    events = read_trace(FIXTURES / "reduce-scatter.cvz").events
    [question] = questions(EventLog(events), rank=0)
    assert question.op == "reduce_scatter"
    assert all(s == frozenset(range(4)) for s in question.provenance)  # every rank's data reduced into it
    score = Score()
    score.add(grade(question, " ".join(f"{v:g}" for v in question.values)))
    score.add(grade(question, "who: 0"))
    n = len(question.values)
    assert score.text == f"1 of 2 questions right ({n} of {2 * n} elements)"


async def test_a_quiz_round_in_the_viewer_predict_reveal_score():
    """From a recorded trace: → at the all-gather step asks; the prediction is graded, the step
    revealed, and the score given at the last question."""
    from collviz.app.app import make_app
    from collviz.app.screens.quiz import QuizScreen

    from support.app import until

    events = read_trace(FIXTURES / "all-gather.cvz").events
    [question] = questions(EventLog(events), rank=0)
    notes: list[str] = []
    app = make_app(trace=FIXTURES / "all-gather.cvz", quiz=True)
    app.notify = lambda message, **kwargs: notes.append(message)  # type: ignore[method-assign]
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.loaded)
        await pilot.press("home", "right")  # step 1 (setup): no collective, no question
        assert not isinstance(app.screen, QuizScreen)
        before = app.cursor
        await pilot.press("right")  # the all-gather step: asked before it is shown
        await until(pilot, lambda: isinstance(app.screen, QuizScreen))
        assert app.cursor == before  # not revealed yet
        await pilot.press(*" ".join(f"{v:.3g}" for v in question.values[:15]), " ", "9", "enter")
        await until(pilot, lambda: app.cursor > before)  # revealed behind the screen
        assert app.current_view().step == question.step
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, QuizScreen))
    assert app.quiz_flow.round.score.text == "0 of 1 questions right (15 of 16 elements)"
    assert notes[-1] == "quiz over: 0 of 1 questions right (15 of 16 elements)"


def test_training_steps_are_asked_about_one_part_of_a_large_buffer(training_runs):
    """fsdp on 4 ranks: W_query has d_model = 64 rows, 16 per rank. Block 0's forward all-gather
    asks whose data row 17 of rank 0's gathered W_query holds (rank 1's: rows 16-31); the
    reduce-scatter asks about a row of the averaged gradient shard rank 0 keeps (every rank's)."""
    from collviz.app.model.quiz import nothing_to_ask
    from collviz.runtime.wire.protocol import Phase
    from support.training import settings_of

    events = training_runs["fsdp"].events
    names = {e.index: e.name for e in events if isinstance(e, Phase) and e.edge == "begin" and e.rank == 0}
    asked = {names[q.step]: q for q in questions(EventLog(events), rank=0)}
    rows_per_rank = settings_of("fsdp")["d_model"] // 4
    gather = asked["block 0 forward: all-gather"]
    assert gather.part == f"row {rows_per_rank + 1}" and gather.buffer == "block 0 W_query (gathered)"
    assert set(gather.provenance) == {frozenset({1})}
    assert grade(gather, "who: 1").all_right and grade(gather, "1").all_right and not grade(gather, "who: 0").all_right
    kept = asked["block 0 backward: reduce-scatter"]
    assert kept.buffer == "block 0 W_query grad shard (averaged)" and set(kept.provenance) == {frozenset(range(4))}
    assert grade(kept, "who: 0+1+2+3").all_right
    assert f"Whose data does row {rows_per_rank + 1} of rank 0" in gather.text
    compute = next(i for i, name in names.items() if name == "block 0 forward: compute")
    assert nothing_to_ask(EventLog(events), compute) == f"step {compute + 1} ran no collective: nothing to predict"
    # every unit's calls are asked about its own weight (the panels follow each unit: issue 43)
    for unit, label in (("embed", "embed tokens"), ("block 1", "block 1 W_query"), ("head", "head W_out")):
        other = asked[f"{unit} forward: all-gather"]
        assert (other.buffer, other.part) == (f"{label} (gathered)", f"row {rows_per_rank + 1}")
        assert set(other.provenance) == {frozenset({1})}


def test_a_trace_opened_whole_asks_the_same_questions_as_its_events_in_memory():
    """The quiz reads the log's indexes, so a trace whose events stay in the file (opened by the
    fast path) asks what the same events held in a list ask, step by step."""
    from collviz.app.model.sources import load_trace

    for name in ("fsdp-tiny.cvz", "reduce-scatter.cvz", "moe.cvz"):
        events = read_trace(FIXTURES / name).events
        stored, _ = load_trace(FIXTURES / name, lambda stage, done, total: None)
        assert questions(stored) == questions(EventLog(events)) and questions(stored)
        for step in range(stored.phase_count):
            assert QuizRound().ask(stored, step) == QuizRound().ask(EventLog(events), step)


def test_the_marks_are_a_tally_and_the_wrong_elements_only():
    """A 16-value question answered with two values changed: the tally, then those two, each with
    what was typed and what the run reported; all right: the tally alone."""
    import dataclasses

    from collviz.app.model.quiz import Grade
    from collviz.app.screens.quiz import marks_text

    events = read_trace(FIXTURES / "all-gather.cvz").events
    [question] = questions(EventLog(events), rank=0)
    typed = [f"{v:.3g}" for v in question.values]
    assert marks_text(grade(question, " ".join(typed))).plain == "✓ all 16 right"
    typed[3], typed[9] = "7", "8"
    lines = marks_text(grade(question, " ".join(typed))).plain.splitlines()
    def shown(v: float) -> str:  # the panels' way: a float with no fraction keeps its .0 among fractions
        return f"{v:.1f}" if v.is_integer() else f"{v:.3g}"

    assert lines == ["✗ 14 of 16 right",
                     f"✗ [3] you: 7   the run: {shown(question.values[3])}",
                     f"✗ [9] you: 8   the run: {shown(question.values[9])}"]
    one = Grade(dataclasses.replace(question, values=(1.0, 1.4)), "values", ("2", "1.4"), (False, True))
    assert marks_text(one).plain.splitlines()[1] == "✗ [0] you: 2   the run: 1.0"  # a float result, not 1
    who = marks_text(grade(question, "who: " + ", ".join(["0"] * 16))).plain.splitlines()
    assert who[0] == "✗ 4 of 16 right"  # elements 0-3 are rank 0's shard, 4-15 the others'
    assert who[1:] == [f"✗ [{i}] you: 0   the run: r{i // 4}" for i in range(4, 16)]


def test_past_sixteen_wrong_elements_the_rest_are_counted():
    from collviz.app.model.quiz import Grade
    from collviz.app.screens.quiz import WRONG_LISTED, marks_text

    events = read_trace(FIXTURES / "all-gather.cvz").events
    [question] = questions(EventLog(events), rank=0)
    many = Grade(question, "values", ("1",) * 64, (False,) * 60 + (True,) * 4)
    lines = marks_text(many).plain.splitlines()
    assert lines[0] == "✗ 4 of 64 right" and len(lines) == 1 + WRONG_LISTED + 1
    assert lines[-1] == f"… and {60 - WRONG_LISTED} more wrong"


async def test_a_step_with_nothing_to_ask_says_why_whole_at_100_columns():
    """z, then → from the start onto setup (no collective): the header's second line says there is
    nothing to ask, within 100 columns; the toast (which wraps) says why."""
    from collviz.app.app import make_app
    from support.screens import screen_lines
    from support.synthetic import all_gather_events

    app = make_app(events=all_gather_events())
    toasts: list[tuple[str, str]] = []
    shown = app.notify
    app.notify = lambda message, **kw: (toasts.append((kw.get("title", ""), message)), shown(message, **kw))[-1]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("home", "z", "right")
        await pilot.pause()
        line = next(line for line in screen_lines(app.export_screenshot()) if "quiz:" in line)
        assert "quiz: nothing to ask at step 1" in line and len(line.rstrip()) <= 100, line
    assert toasts[-1] == ("quiz: nothing to ask", "step 1 ran no collective: nothing to predict")


def test_a_call_with_no_buffer_after_it_says_so():
    """The synthetic all-gather without its gathered output: step 2's call has nothing to ask about."""
    from collviz.app.model.quiz import nothing_to_ask

    from support.synthetic import all_gather_events

    events = [e for e in all_gather_events(world=4) if not (isinstance(e, Buffer) and e.moment == "after")]
    assert nothing_to_ask(EventLog(events), 1) == "step 2's all_gather: rank 0 showed no buffer after it"
