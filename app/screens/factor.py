"""The "why this factor" screen: where busbw's factor comes from, with the step's own numbers."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..model import CallCost
from ..widgets.cost import cost_lines
from ..widgets.render import format_bytes

__all__ = ["FactorScreen", "factor_explanation"]

_SOURCE = ("These are nccl-tests' definitions (doc/PERFORMANCE.md): busbw is the bandwidth each link carried, "
           "so it compares with the hardware's link bandwidth whatever the operation and the number of ranks; "
           "algbw = S/t falls as n grows even when every link runs at full speed.")
_LOGICAL = ("collviz's transfers pane shows where each element came from and went (logical data movement); "
            "the backend's own route inside one call is not observable, the factor assumes the "
            "bandwidth-optimal one.")


def factor_explanation(cost: CallCost) -> Text:
    """Why busbw = algbw × factor for ``cost``'s op, worked through with its size and rank count."""
    n, size = cost.ranks, cost.algo_bytes
    part = format_bytes(size // n) if n else "?"
    if cost.op == "all_reduce":
        sent = 2 * (n - 1) * size // n
        why = (f"S = {format_bytes(size)} is the buffer being summed. The bandwidth-optimal all-reduce is a ring: "
               f"a reduce-scatter, then an all-gather, each in n−1 = {n - 1} hops of one chunk of S/n = {part}. "
               f"Every rank sends (n−1)/n·S in each half, 2(n−1)/n·S = 2·{n - 1}/{n}·S = {format_bytes(sent)} in all: "
               f"that is the traffic on each rank's link, hence the factor 2(n−1)/n.")
    elif cost.op in ("all_gather", "gather"):
        sent = (n - 1) * size // n
        why = (f"S = {format_bytes(size)} is the gathered whole, n parts of {part}. Every rank already holds its own "
               f"part and must receive the other n−1 = {n - 1}: (n−1)/n·S = {format_bytes(sent)} arrives on each "
               f"rank's link, hence the factor (n−1)/n.")
    elif cost.op in ("reduce_scatter", "scatter"):
        sent = (n - 1) * size // n
        why = (f"S = {format_bytes(size)} is each rank's whole input, n parts of {part}. Every rank keeps one part "
               f"and must send the other n−1 = {n - 1} on (reduced along the way): (n−1)/n·S = {format_bytes(sent)} "
               f"leaves each rank's link, hence the factor (n−1)/n.")
    elif cost.op == "all_to_all":
        sent = (n - 1) * size // n
        why = (f"S = {format_bytes(size)} is each rank's buffer, n chunks of {part}. Each rank keeps its own chunk "
               f"and sends the other n−1: (n−1)/n·S = {format_bytes(sent)} per rank, hence (n−1)/n.")
    else:
        why = (f"S = {format_bytes(size)} is the buffer. Cut into small pieces and pipelined along a chain of ranks, "
               f"the whole buffer crosses each link once, whatever n: the factor is 1.")
    text = Text()
    text.append_text(cost_lines(cost))
    text.append("\n\n")
    text.append(why)
    text.append("\n\n")
    text.append(_SOURCE + " " + _LOGICAL, "dim")
    return text


class FactorScreen(ModalScreen[None]):
    """A box explaining the bus factor of one call; esc or b closes it."""

    BINDINGS = [Binding("escape", "dismiss", "close"), Binding("b", "dismiss", "close", show=False),
                Binding("question_mark", "app.help", "help", key_display="?", show=False)]

    def __init__(self, cost: CallCost) -> None:
        super().__init__()
        self.cost = cost

    def compose(self) -> ComposeResult:
        """The explanation inside a bordered, scrolling box."""
        with VerticalScroll(id="factor-box"):
            yield Static(factor_explanation(self.cost))

    def on_mount(self) -> None:
        """Title the box with the op."""
        box = self.query_one("#factor-box")
        box.border_title = Text(f"why busbw = algbw × factor · {self.cost.op}")
        box.border_subtitle = "esc: close"
