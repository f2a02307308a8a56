"""Training the span selector: the dataset recorded through the decoder, seeded LoRA training, the held-out
evaluation and the card written next to the adapter."""
