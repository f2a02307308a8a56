"""The fence language of a file, from its name (the CLI, the language server and the syntax
check all ask the same question). The names are the code fence's, which for most languages are
also tree-sitter-language-pack's grammar names (engine.checks.syntax maps the few that differ)."""

from __future__ import annotations

from pathlib import PurePath

# The code fence language the prompts name, by file suffix.
LANGUAGE_BY_SUFFIX = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "jsx", ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala",
    ".c": "c", ".h": "c", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".cu": "cuda",
    ".cs": "csharp", ".swift": "swift", ".rb": "ruby", ".php": "php", ".lua": "lua",
    ".sh": "bash", ".bash": "bash", ".zsh": "bash", ".pl": "perl", ".r": "r", ".jl": "julia", ".dart": "dart",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml",
    ".fs": "fsharp", ".clj": "clojure", ".elm": "elm", ".zig": "zig", ".nim": "nim",
    ".sql": "sql", ".html": "html", ".htm": "html", ".css": "css", ".scss": "scss", ".vue": "vue",
    ".svelte": "svelte", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".xml": "xml",
    ".tf": "hcl", ".hcl": "hcl", ".proto": "proto", ".graphql": "graphql", ".sol": "solidity",
}


def language_for(path: str) -> str:
    """Fence language for a file name (empty when unknown)."""
    return LANGUAGE_BY_SUFFIX.get(PurePath(path).suffix.lower(), "")
