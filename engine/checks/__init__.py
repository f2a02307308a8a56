"""Checks on an edit before it is applied: loop and damage guards, syntax, the one verdict every front door uses."""
