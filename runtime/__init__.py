"""Headless runtime: launches workers, runs scenarios on real process groups, streams events.

Never imports textual (a test enforces it): this package runs on cluster nodes without a screen.
"""
