"""The viewer's screens: the main view, rank detail, help and seek."""

from .help import HelpScreen
from .rank_detail import RankDetailScreen
from .seek import SeekScreen
from .viewer import ViewerScreen

__all__ = ["HelpScreen", "RankDetailScreen", "SeekScreen", "ViewerScreen"]
