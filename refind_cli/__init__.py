"""refind: agent memory over raw chat logs."""

__version__ = "0.1.0"
