"""Built-in scenarios of the emulator, as data files (README.md here: their format)."""
