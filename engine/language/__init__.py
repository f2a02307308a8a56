"""The edit-program language: AST, grammar, resolver, incremental scanner, oracle programs. No model."""
