"""setui's shipped themes, as TOML files: ``themes/`` in the repository, where users find
and copy them, installed as the package ``setui.themes`` (pyproject.toml maps it)."""
