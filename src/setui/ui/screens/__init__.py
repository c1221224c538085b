"""The dashboard's screens, one module each; they reach the app through messages and actions."""
