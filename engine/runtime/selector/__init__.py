"""The span selector: a LoRA adapter that teaches the embedded model to write edit programs.

* ``dataset``: training examples = the exact token sequences the program decoder feeds (recorded
  from forced mode), with the loss only on model-chosen positions;
* ``train``: seeded, resumable LoRA training over those examples;
* ``adapter``: the adapter on disk (size limit, the shipped copy, ``selector`` resolution, merging
  it into a copy of the base model for program mode);
* ``evaluate`` / ``card``: the held-out evaluation and the model card written next to the adapter.

The shipped adapter for the embedded SmolLM2-135M lives in ``engine/runtime/selector/smollm2-135m/``
(``adapter_model.safetensors``, ``adapter_config.json``, ``CARD.md``, ``loss.png``,
``training.json``); ``copy-as-decode train-selector`` writes it.
"""
