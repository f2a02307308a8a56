"""An OpenAI-compatible HTTP API on the engine, with Predicted Outputs (``copy-as-decode serve-openai``).

* :mod:`.schemas`: the request bodies (pydantic) and the OpenAI response shapes.
* :mod:`.errors`: errors in OpenAI's shape with their HTTP status.
* :mod:`.completion`: one chat completion: messages through the chat template, decoded by
  :class:`engine.decoding.greedy.DraftedDecode` with the prediction as the draft source (lossless under
  greedy), stop strings, streamed text deltas and the prediction's accepted/rejected counts.
* :mod:`.apply`: apply (merge an update into a file) in the conventions apply clients speak: a chat
  completion holding ``<code>``/``<update>`` and ``POST /v1/code/apply``.
* :mod:`.queue`: one decode at a time on an in-process backend, with a bounded wait queue; a
  remote backend (vLLM) runs requests concurrently.
* :mod:`.app`: the FastAPI routes (chat completions, models, the engine's own edits, apply, health).
"""
