"""The viewer's widgets, one per module, each with its own messages."""

from .bench_plot import BenchPlot
from .cost import CostPane
from .event_log import EventLogPane
from .legend import Legend
from .memory_timeline import MemoryTimeline
from .narration import NarrationPane
from .pipeline_timeline import PipelineTimeline
from .rank_heatmap import RankHeatmap
from .rank_panel import RankPanel
from .run_header import RunHeader
from .side_column import SideColumn
from .transfers import TransfersPane
from .work_progress import WorkProgress

__all__ = ["BenchPlot", "CostPane", "EventLogPane", "Legend", "MemoryTimeline", "NarrationPane", "PipelineTimeline", "RankHeatmap", "RankPanel", "RunHeader", "SideColumn", "TransfersPane", "WorkProgress"]
