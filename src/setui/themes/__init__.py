"""setui's shipped themes, as TOML files; installed as the package data ``setui.themes``."""
