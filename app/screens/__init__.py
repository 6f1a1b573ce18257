"""The viewer's screens: the main view, rank detail, help, seek and the bus factor."""

from .factor import FactorScreen
from .help import HelpScreen
from .rank_detail import RankDetailScreen
from .number_prompt import NumberPrompt
from .viewer import ViewerScreen

__all__ = ["FactorScreen", "HelpScreen", "NumberPrompt", "RankDetailScreen", "ViewerScreen"]
