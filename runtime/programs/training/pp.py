"""``pp``: pipeline parallelism, the tiny GPT cut into one stage per rank.

Stage s holds a contiguous run of the model's pieces (the embeddings on stage 0, the head on the
last stage, the blocks spread so every stage has at least one) and is wrapped in torch's own
``PipelineStage``; ``ScheduleGPipe`` or ``Schedule1F1B`` runs the batch as microbatches. collviz
wraps the stage's per-microbatch methods to see what the schedule does, without changing it:

- each ``forward_one_chunk`` / ``backward_one_chunk`` is a :class:`Span` event (its duration), and
  a memory sample follows it, so the stage's activations are seen to pile up and drain. On CUDA
  the span is timed by CUDA events on the compute stream and the host waits for its end before
  going on (the host only queues kernels: its own clock would give launch times), so a span and
  the bubble between spans are the GPU's;
- what each stage received before a forward (activations from the previous stage) or a backward
  (the gradient of its output from the next stage) is a ``p2p`` :class:`Transfer`, from the
  receive ops the schedule itself posted.

The time between a rank's spans is the bubble: waiting for data (and, here, the few microseconds
of collviz's own events). After the step every rank builds the whole model alone and checks the
loss and its stage's gradients against the unpipelined step. (Not the parameters after AdamW: its
first step moves each weight by about lr · g/(|g| + ε), which turns float rounding in a gradient
near ε into a difference of up to lr, so equal gradients are the meaningful test.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from ...context import RankContext
from ...errors import UsageError
from ...observation.tensors import uniform_provenance
from ...observation.timing import CallClock
from ...reports.pipeline import ideal_bubble
from ...scenario_files.schema import Scenario
from ...wire.protocol import Span, Transfer
from ..program import RunOptions
from .common import PhaseSequence, TrainingProgram, check_close, gradient, refuse_options, timed_steps
from .model import TinyGPT, make_gpt, token_batch

__all__ = ["PipelineProgram", "SCHEDULES", "build", "stage_blocks", "stage_pieces", "PipelineStageModule",
           "reference_step"]

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
"""``--schedule`` names and torch's schedule classes."""

DEFAULT_SCHEDULE = "gpipe"
"""The schedule a run uses unless ``--schedule`` says otherwise: the one whose bubble is plainest."""


def stage_blocks(blocks: int, stages: int, stage: int) -> list[int]:
    """The transformer blocks stage ``stage`` of ``stages`` holds: block b goes to stage ⌊b·stages/blocks⌋."""
    return [b for b in range(blocks) if b * stages // blocks == stage]


def stage_pieces(blocks: int, stages: int, stage: int) -> list[str]:
    """The names of the model's pieces on ``stage``, in order (``embed``, ``blocks.k``, ``head``)."""
    pieces = ["embed"] if stage == 0 else []
    pieces += [f"blocks.{b}" for b in stage_blocks(blocks, stages, stage)]
    return pieces + (["head"] if stage == stages - 1 else [])


class PipelineStageModule(nn.Module):
    """One stage's share of a :class:`TinyGPT`: its pieces, applied in order (the modules are the
    model's own, so parameter names stay the model's)."""

    def __init__(self, model: TinyGPT, pieces: list[str]) -> None:
        super().__init__()
        self.pieces = pieces
        self.parts = nn.ModuleList(model.get_submodule(name) for name in pieces)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids (first stage) or activations in; activations or logits (last stage) out."""
        for part in self.parts:
            x = part(x)
        return x

    def named_model_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """(name in the whole model, parameter) of every parameter this stage holds."""
        return [(f"{piece}.{name}", p) for piece, part in zip(self.pieces, self.parts)
                for name, p in part.named_parameters()]


@dataclass(frozen=True)
class PipelineProgram(TrainingProgram):
    """One pipelined training step on ``world_size`` stages."""

    params: int
    schedule: str
    microbatches: int

    @property
    def phase_count(self) -> int:
        """setup, schedule, optimizer, check, timed steps."""
        return 5

    def narration_values(self, world_size: int) -> dict[str, object]:
        """Values for the narration placeholders."""
        blocks = int(self.settings["blocks"])
        stages = "; ".join(f"r{s} " + " + ".join(stage_pieces(blocks, world_size, s)) for s in range(world_size))
        return {"world_size": world_size, "params": f"{self.params:,}", "stages": stages,
                "schedule": "GPipe" if self.schedule == "gpipe" else "1F1B", "microbatches": self.microbatches,
                "microbatch": int(self.settings["batch"]) // self.microbatches, "batch": self.settings["batch"],
                "bubble": f"{ideal_bubble(world_size, self.microbatches):.3f}",
                "timed_steps": self.settings["timed_steps"]}

    def run_options(self) -> dict[str, str | int | float | bool]:
        """Settings plus the schedule and microbatch count, as recorded in RunStart."""
        return {**self.settings, "schedule": self.schedule, "microbatches": self.microbatches}

    def run(self, ctx: RankContext) -> None:
        """Run this rank's stage: every phase, every event."""
        run_pp(ctx, self)


def build(scenario: Scenario, world_size: int, options: RunOptions) -> PipelineProgram:
    """The pipeline program; ``--schedule`` and ``--microbatches`` override the defaults.

    UsageError when a stage would get no block, the microbatches do not divide the batch, or
    1F1B has fewer microbatches than stages (torch's schedule refuses that).
    """
    refuse_options(options, scenario.name, allowed=("schedule", "microbatches"))
    settings = dict(scenario.settings)
    blocks, batch = int(settings["blocks"]), int(settings["batch"])
    schedule = options.schedule or DEFAULT_SCHEDULE
    microbatches = int(options.microbatches if options.microbatches is not None else settings["microbatches"])
    if schedule not in SCHEDULES:
        raise UsageError(f"--schedule {schedule}: not one of {', '.join(SCHEDULES)}")
    if world_size > blocks:
        raise UsageError(f"pp: {world_size} stages need at least {world_size} transformer blocks (one per stage); "
                         f"{scenario.name} has settings.blocks = {blocks} (edit a copy and run `collviz FILE`)")
    if not 1 <= microbatches <= batch or batch % microbatches:
        raise UsageError(f"--microbatches {microbatches}: must divide the batch of {batch} sequences "
                         f"(settings.batch) into equal microbatches")
    if schedule == "1f1b" and microbatches < world_size:
        raise UsageError(f"--schedule 1f1b needs at least as many microbatches as stages: "
                         f"--microbatches {microbatches} < {world_size}")
    params = sum(p.numel() for p in make_gpt(settings).parameters())
    seed = int(settings["seed"])
    return PipelineProgram(world_size=world_size, settings=scenario.settings, params=params, schedule=schedule,
                           microbatches=microbatches,
                           source=f"tiny GPT, {params:,} parameters from torch.manual_seed({seed}); one batch of "
                                  f"tokens from generator seed {seed} + 1, fed to stage 0")


def _loss(vocab: int):
    """Cross-entropy of logits against targets, as the schedule calls it per microbatch."""

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    return loss


def reference_step(settings: dict) -> tuple[float, dict[str, torch.Tensor]]:
    """The unpipelined forward and backward on one process: (loss, gradients by parameter name)."""
    model = make_gpt(settings)
    inputs, targets = token_batch(settings, 0)
    loss = _loss(int(settings["vocab"]))(model(inputs), targets)
    loss.backward()
    return float(loss), {name: gradient(p).detach().clone() for name, p in model.named_parameters()}


class _StageWatch:
    """Wraps a PipelineStage's per-microbatch methods: spans, received transfers, memory samples."""

    def __init__(self, ctx: RankContext, phases: PhaseSequence, stage: PipelineStage) -> None:
        self.ctx, self.phases, self.stage = ctx, phases, stage
        self._received: dict[tuple[str, int], list[tuple[int, torch.Tensor]]] = {}
        for name in ("get_fwd_recv_ops", "get_bwd_recv_ops"):
            setattr(stage, name, self._receiving(getattr(stage, name), "forward" if "fwd" in name else "backward"))
        for name in ("forward_one_chunk", "backward_one_chunk"):
            setattr(stage, name, self._timed(getattr(stage, name), name.split("_")[0]))

    def _receiving(self, method, kind: str):
        def posted(chunk: int) -> list[dist.P2POp]:
            ops = method(chunk)
            self._received[(kind, chunk)] = [(op.peer, op.tensor) for op in ops]
            return ops

        return posted

    def _timed(self, method, kind: str):
        ctx = self.ctx

        def run(chunk: int, *args, **kwargs):
            if self.phases.paused:
                return method(chunk, *args, **kwargs)
            self._show_received(kind, chunk)
            clock = CallClock(ctx.device)  # CUDA: events on the compute stream, read once it has run
            result = method(chunk, *args, **kwargs)
            clock.issued()
            took = clock.read()
            ctx.emitter.emit(Span, t_ns=took.ended_ns, phase=ctx.phase_index, kind=kind, microbatch=chunk,
                             duration_ns=took.duration_ns)
            ctx.memory(f"{'F' if kind == 'forward' else 'B'}{chunk}")
            return result

        return run

    def _show_received(self, kind: str, chunk: int) -> None:
        """Transfers (and, for microbatch 0, the tensor) this stage received for ``chunk``."""
        ctx = self.ctx
        what = "activations" if kind == "forward" else "output grad"
        for peer, tensor in self._received.pop((kind, chunk), []):
            ctx.emitter.emit(Transfer, phase=ctx.phase_index, src=peer, dst=ctx.rank,
                             bytes=tensor.numel() * tensor.element_size(), buffer=f"{what} mb{chunk}",
                             start=0, length=tensor.numel(), kind="p2p")
            if chunk == 0:
                ctx.buffer(f"{what} from r{peer} (mb 0)", "communication", "after", tensor,
                           uniform_provenance(tensor.numel(), [peer]))


def run_pp(ctx: RankContext, program: PipelineProgram) -> None:
    """This rank's stage of the pipelined step."""
    settings = dict(program.settings)
    rank, stages = ctx.rank, ctx.world_size
    first, last = rank == 0, rank == stages - 1
    pieces = stage_pieces(int(settings["blocks"]), stages, rank)
    phases = PhaseSequence(ctx)
    phases.next("setup", f"setup: the model cut into {stages} stages, one per rank", category="params", gated=False)
    module = PipelineStageModule(make_gpt(settings), pieces).to(ctx.device)
    named = module.named_model_parameters()
    with ctx.tracker.category("grads"):
        for _, p in named:
            p.grad = torch.zeros_like(p)
    stage = PipelineStage(module, rank, stages, ctx.device)
    _StageWatch(ctx, phases, stage)
    schedule = SCHEDULES[program.schedule](stage, n_microbatches=program.microbatches,
                                           loss_fn=_loss(int(settings["vocab"])))
    with ctx.tracker.category("inputs"):
        # contiguous: the targets are a view with the inputs' stride, which some torch versions'
        # pipelining refuses (it checks each microbatch's strides against the first one's)
        inputs, targets = (t.to(ctx.device).contiguous() for t in token_batch(settings, 0))
    if first:
        ctx.buffer("tokens", "input", "before", inputs, uniform_provenance(inputs.numel(), [rank]))
    ctx.buffer(f"stage {rank} parameters", "param", "before",
               torch.cat([p.detach().reshape(-1) for _, p in named]), None)

    def step(losses: list | None = None) -> None:
        """One pipelined forward and backward; stage 0 feeds the tokens, the last stage the targets."""
        if first:
            schedule.step(inputs, target=targets if last else None, losses=losses)
        elif last:
            schedule.step(target=targets, losses=losses)
        else:
            schedule.step()

    phases.next("schedule", f"{'GPipe' if program.schedule == 'gpipe' else '1F1B'}: {program.microbatches} "
                f"microbatches through {stages} stages", category="activations")
    losses: list[torch.Tensor] = []
    step(losses)
    if last:
        ctx.buffer("microbatch losses", "loss", "result", torch.stack([l.detach() for l in losses]), None)
    with ctx.tracker.suspended():
        grads = {name: gradient(p).detach().clone() for name, p in named}
    phases.next("optimizer", "AdamW step on each stage's own parameters", category="optimizer")
    optimizer = torch.optim.AdamW(module.parameters(), lr=float(settings["lr"]))
    optimizer.step()
    ctx.buffer(f"stage {rank} parameters", "param", "after",
               torch.cat([p.detach().reshape(-1) for _, p in named]), None)

    phases.next("check", "check: the unpipelined step on one process")
    with ctx.tracker.suspended():
        loss, ref_grads = reference_step(settings)
        names = [name for name, _ in named]
        if last:
            check_close(ctx, "loss equals the unpipelined model's", torch.stack(losses).mean().detach().cpu(),
                        torch.tensor(loss), "the whole batch's loss on one process (mean of equal microbatches)")
        check_close(ctx, f"stage {rank}'s gradients equal the unpipelined model's",
                    torch.cat([grads[n].reshape(-1) for n in names]).cpu(),
                    torch.cat([ref_grads[n].reshape(-1) for n in names]), "the whole model's gradients")

    def timed_step() -> None:
        optimizer.zero_grad(set_to_none=False)
        step()
        optimizer.step()

    timed_steps(ctx, phases, int(settings["timed_steps"]), timed_step)
    phases.close()
