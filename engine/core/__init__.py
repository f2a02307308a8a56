"""Shared bottom layer: errors, the newline convention, token pieces. Imports nothing of the engine."""
