"""The package version, read by the build (pyproject.toml) and by ``privreg.__version__``.

Kept apart from ``privreg/__init__.py`` so the build reads it without importing privreg.
"""

__version__ = "0.1.0"
