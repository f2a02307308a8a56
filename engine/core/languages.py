"""The fence language of a file, from its name (the CLI, the language server and the syntax
check all ask the same question)."""

from __future__ import annotations

from pathlib import PurePath

# The code fence language the prompts name, by file suffix.
LANGUAGE_BY_SUFFIX = {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
                      ".java": "java", ".c": "c", ".h": "c", ".cpp": "cpp", ".cc": "cpp", ".hpp": "cpp",
                      ".rb": "ruby", ".lua": "lua", ".sh": "bash", ".tsx": "tsx", ".jsx": "jsx"}


def language_for(path: str) -> str:
    """Fence language for a file name (empty when unknown)."""
    return LANGUAGE_BY_SUFFIX.get(PurePath(path).suffix.lower(), "")
